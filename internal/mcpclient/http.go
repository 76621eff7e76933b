package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The headers of the streamable HTTP transport.
const (
	headerSession     = "Mcp-Session-Id"
	headerVersion     = "Mcp-Protocol-Version"
	headerLastEventID = "Last-Event-ID"
)

// maxErrorBody bounds what is read of an HTTP error's body.
const maxErrorBody = 64 << 10

// streamRetryDelay is how long loopbot waits before opening the server's stream again
// after it ended.
const streamRetryDelay = time.Second

// ConnectHTTP reaches a streamable HTTP server at endpoint with client and makes the
// handshake within ctx. Every message is a POST; a request's reply carries its response,
// as JSON or as a stream of events that may carry the server's own requests first. After
// the handshake loopbot opens the server's stream (a GET) for what the server sends on its
// own, such as a changed tool list; a server without one answers 405.
func ConnectHTTP(ctx context.Context, endpoint string, client *http.Client, opts Options) (*Session, error) {
	s := newSession(opts)
	life, cancel := context.WithCancel(context.Background())
	c := &httpConn{s: s, endpoint: endpoint, client: client, life: life, cancel: cancel}
	s.conn = c
	if err := s.handshake(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// httpConn is a session with a streamable HTTP server.
type httpConn struct {
	s        *Session
	endpoint string
	client   *http.Client

	// life is the lifetime of the server's stream and of the replies being read.
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	sessionID string
	version   string
	missing   bool // the server no longer knows the session
	once      sync.Once
}

func (c *httpConn) headers(h http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessionID != "" {
		h.Set(headerSession, c.sessionID)
	}
	if c.version != "" {
		h.Set(headerVersion, c.version)
	}
}

// sessionGone reports a 404 to a request that carried a session id: the server restarted
// or dropped the session.
func (c *httpConn) sessionGone(resp *http.Response) bool {
	if resp.StatusCode != http.StatusNotFound {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessionID == "" {
		return false
	}
	c.missing = true
	return true
}

func (c *httpConn) send(ctx context.Context, msg []byte, call bool, id int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.headers(req.Header)
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrConnectionClosed, err)
	}
	if c.sessionGone(resp) {
		resp.Body.Close()
		c.s.fail(ErrSessionMissing)
		return ErrSessionMissing
	}
	if sid := resp.Header.Get(headerSession); sid != "" {
		c.mu.Lock()
		if c.sessionID == "" {
			c.sessionID = sid
		}
		c.mu.Unlock()
	}
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		// A server may refuse a request with a JSON-RPC error in the body.
		if call && bytes.Contains(body, []byte(`"error"`)) {
			c.s.deliver(body)
		}
		return fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if !call {
		resp.Body.Close()
		return nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%w: read the reply: %v", ErrConnectionClosed, err)
		}
		c.s.deliver(body)
		c.s.unanswered(id, errors.New("the server's reply held no response"))
	case "text/event-stream":
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			// The reply is read for as long as the call waits: its context ends it.
			defer context.AfterFunc(c.life, func() { resp.Body.Close() })()
			_, err := readEvents(resp.Body, c.s.deliver)
			resp.Body.Close()
			if err == nil {
				err = errors.New("the server ended the reply without a response")
			}
			c.s.unanswered(id, fmt.Errorf("%w: %v", ErrConnectionClosed, err))
		}()
	default:
		resp.Body.Close()
		return fmt.Errorf("the reply has content type %q", ct)
	}
	return nil
}

// initialized keeps the version agreed for the header of every later request and opens the
// server's stream.
func (c *httpConn) initialized(version string) {
	c.mu.Lock()
	c.version = version
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.listen()
	}()
}

// listen reads the server's stream until the session ends. A stream that ends is opened
// again once; if that fails, the session has ended.
func (c *httpConn) listen() {
	lastID := ""
	for failures := 0; ; {
		resp, err := c.openStream(lastID)
		switch {
		case c.life.Err() != nil:
			return
		case err != nil:
			failures++
		case resp == nil:
			return // the server has no stream
		default:
			var id string
			id, err = readEvents(resp.Body, c.s.deliver)
			resp.Body.Close()
			if id != "" {
				lastID = id
			}
			if c.life.Err() != nil {
				return
			}
			if err == nil {
				failures = 0 // a clean end: the server may close it now and then
			} else {
				failures++
			}
		}
		if failures > 1 {
			c.s.fail(fmt.Errorf("%w: the server's stream failed: %v", ErrConnectionClosed, err))
			return
		}
		select {
		case <-c.life.Done():
			return
		case <-time.After(streamRetryDelay):
		}
	}
}

// openStream opens the server's stream; nil with no error means the server has none.
func (c *httpConn) openStream(lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.life, http.MethodGet, c.endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.headers(req.Header)
	if lastID != "" {
		req.Header.Set(headerLastEventID, lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	if c.sessionGone(resp) {
		resp.Body.Close()
		c.s.fail(ErrSessionMissing)
		return nil, ErrSessionMissing
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 400 || ct != "text/event-stream" {
		// 405 says the server offers no stream; some servers say it with another status
		// or a body of another type.
		resp.Body.Close()
		return nil, nil
	}
	return resp, nil
}

// close ends the streams and tells the server the session is over (DELETE), unless it
// already forgot it.
func (c *httpConn) close() error {
	c.once.Do(func() {
		c.cancel()
		c.mu.Lock()
		sid, missing := c.sessionID, c.missing
		c.mu.Unlock()
		if sid != "" && !missing {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.endpoint, nil); err == nil {
				c.headers(req.Header)
				if resp, err := c.client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
		c.wg.Wait()
	})
	return nil
}

// readEvents reads a stream of server-sent events and hands the data of each to deliver. It
// returns the last event id seen, and nil at the stream's end.
func readEvents(r io.Reader, deliver func([]byte)) (lastID string, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	var line []byte
	for {
		part, isPrefix, err := br.ReadLine()
		if err == io.EOF {
			return lastID, nil
		}
		if err != nil {
			return lastID, err
		}
		line = append(line, part...)
		if len(line) > maxLine {
			return lastID, fmt.Errorf("an event of more than %d bytes", maxLine)
		}
		if isPrefix {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				deliver(data)
			}
			data = nil
		case string(field) == "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case string(field) == "id":
			lastID = string(value)
		}
		line = line[:0]
	}
}
