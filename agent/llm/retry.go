package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

// Backoff between attempts, before jitter: baseBackoff doubling per attempt up to maxBackoff.
const (
	baseBackoff = 500 * time.Millisecond
	maxBackoff  = 30 * time.Second
)

// maxRetryAfter is the longest Retry-After the client waits for by itself. An endpoint that
// asks for more is not retried: the caller gets the error, with the wait in an
// *agent.RateLimitError for a 429, and can schedule the run rather than hold it.
const maxRetryAfter = time.Minute

// attemptTimeout is the cause of an attempt's context when Config.Timeout ends it. It
// matches errAttemptTimeout and context.DeadlineExceeded, since it is a deadline.
type attemptTimeout time.Duration

func (d attemptTimeout) Error() string {
	return "attempt timed out after " + time.Duration(d).String()
}

func (d attemptTimeout) Is(target error) bool {
	return target == errAttemptTimeout || target == context.DeadlineExceeded
}

var (
	errAttemptTimeout   = errors.New("attempt timed out")
	errNoChoices        = errors.New("the reply has no choices")
	errIncompleteStream = errors.New("the stream ended before the reply was complete")
)

// StatusError is an error answer of the endpoint.
type StatusError struct {
	StatusCode int
	// Message is the endpoint's explanation, without the API key.
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("endpoint answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ProviderError is an error the endpoint reported inside an answer that began as a success:
// a stream's error chunk, or an error object in a 200 body. It is not retried: the provider
// said what went wrong, and the run's owner decides whether to try again.
type ProviderError struct {
	// Code is the provider's code for the error, when it gave one.
	Code string
	// Message is the provider's explanation, without the API key.
	Message string
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString("the provider reported an error")
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// attemptError is the outcome of one failed attempt: the error and what the header tap saw.
type attemptError struct {
	err  error
	resp responseInfo
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// failure is a failed attempt, judged.
type failure struct {
	// err is what the caller may see: the API key is not in it.
	err        error
	status     int
	retry      bool
	retryAfter time.Duration // what the endpoint asked for; zero when it did not
}

// classify judges a failed attempt: what to tell the caller and whether to try again.
func (c *Client) classify(err error) failure {
	var ae *attemptError
	if !errors.As(err, &ae) {
		return failure{err: c.redact(err)}
	}
	f := failure{status: ae.resp.status, err: c.redact(ae.err)}
	if d, ok := parseRetryAfter(ae.resp.header, c.now()); ok {
		f.retryAfter = d
	}
	var (
		apiErr  *openai.APIError
		reqErr  *openai.RequestError
		urlErr  *url.Error
		provErr *ProviderError
	)
	switch {
	case errors.Is(ae.err, errAttemptTimeout), errors.Is(ae.err, errIncompleteStream):
		f.retry = true
	case errors.As(ae.err, &provErr):
		f.err = &ProviderError{Code: provErr.Code, Message: c.redactString(provErr.Message)}
	case errors.As(ae.err, &apiErr) && apiErr.HTTPStatusCode > 0:
		f.status = apiErr.HTTPStatusCode
		f.err = &StatusError{StatusCode: f.status, Message: c.redactString(apiErr.Message)}
		f.retry = retryableStatus(f.status)
	case errors.As(ae.err, &reqErr):
		f.status = reqErr.HTTPStatusCode
		f.err = &StatusError{StatusCode: f.status, Message: c.redactString(snippet(reqErr.Body))}
		f.retry = retryableStatus(f.status)
	case errors.As(ae.err, &apiErr) && apiErr.HTTPStatusCode == 0 && ae.resp.status == http.StatusOK:
		// go-openai's reading of a stream event that is nothing but an error object.
		code := apiErr.Type
		switch v := apiErr.Code.(type) {
		case string:
			if v != "" {
				code = v
			}
		case int:
			// go-openai reads a null code as 0.
			if v != 0 {
				code = strconv.Itoa(v)
			}
		}
		f.err = &ProviderError{Code: code, Message: c.redactString(apiErr.Message)}
	case ae.resp.bodyErr != nil:
		f.err = fmt.Errorf("the connection broke during the reply: %w", f.err)
		f.retry = true
	case errors.As(ae.err, &urlErr):
		// No answer at all: only the network's own transient failures are worth a retry.
		f.retry = transientNet(urlErr.Err)
	case ae.resp.status >= 200 && ae.resp.status < 300:
		// The whole body arrived but is not a chat completion: a broken server, not a
		// passing failure.
		f.err = fmt.Errorf("the endpoint's reply is not a chat completion: %w", f.err)
	}
	return f
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// transientNet reports whether a transport error is one that a new connection may not meet:
// a reset or refused connection (a server restarting), a connection closed before the
// answer, a network timeout. DNS failures, TLS errors and malformed URLs are not.
func transientNet(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// nextWait says whether to try again after the given attempt (counted from 1) failed as
// f, and how long to wait first.
func (c *Client) nextWait(ctx context.Context, f failure, attempt int) (time.Duration, bool) {
	if !f.retry || attempt > c.maxRetries || f.retryAfter > maxRetryAfter {
		return 0, false
	}
	wait := f.retryAfter
	if wait <= 0 {
		wait = c.jitter(backoff(attempt))
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		// The context would end during the wait: better to say so now.
		return 0, false
	}
	return wait, true
}

// final is the error Complete returns after the last attempt.
func (c *Client) final(f failure, attempts int) error {
	err := explain(f.err, f.status)
	if f.status == http.StatusTooManyRequests {
		err = &agent.RateLimitError{RetryAfter: f.retryAfter, Err: err}
	}
	switch {
	case f.retry && f.retryAfter > maxRetryAfter:
		return fmt.Errorf("complete: not retried, the endpoint asks to wait %s: %w", f.retryAfter, err)
	case attempts > 1:
		return fmt.Errorf("complete: gave up after %d attempts: %w", attempts, err)
	default:
		return fmt.Errorf("complete: %w", err)
	}
}

// backoff is the wait before jitter after the given attempt (counted from 1) failed.
func backoff(attempt int) time.Duration {
	shift := min(max(attempt-1, 0), 16)
	return min(baseBackoff<<shift, maxBackoff)
}

// halfJitter spreads a wait d over [d/2, d], so that clients that failed together do not
// come back together.
func halfJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// maxRetryAfterHeader bounds what a header may ask for, so that huge numbers cannot overflow
// a time.Duration.
const maxRetryAfterHeader = 365 * 24 * time.Hour

// parseRetryAfter reads how long the endpoint asks to wait: OpenAI's retry-after-ms, else
// Retry-After in seconds or as an HTTP date. It reports false when neither says anything
// usable.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := parseNumber(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if d, ok := parseNumber(v, time.Second); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	return min(max(d, 0), maxRetryAfterHeader), true
}

// parseNumber reads a non-negative number of units.
func parseNumber(v string, unit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || n < 0 {
		return 0, false
	}
	if n*float64(unit) >= float64(maxRetryAfterHeader) {
		return maxRetryAfterHeader, true
	}
	return time.Duration(n * float64(unit)), true
}

// snippet is the start of an error body that is not OpenAI's error format (an HTML page
// from a proxy, a server's own format), on one line.
func snippet(body []byte) string {
	const limit = 200
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "..."
	}
	return s
}

// redactString removes the API key from s.
func (c *Client) redactString(s string) string {
	if c.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.apiKey, "[redacted]")
}

// redact returns err, or an error with the same message minus the API key. The redacted
// error still matches sentinels such as context.Canceled under errors.Is, but does not
// unwrap, so that errors.As cannot reach an inner error that quotes the key.
func (c *Client) redact(err error) error {
	if c.apiKey == "" || !strings.Contains(err.Error(), c.apiKey) {
		return err
	}
	return &redactedError{msg: c.redactString(err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

// responseKey is the context key under which an attempt's responseRecord travels to the
// header tap.
type responseKey struct{}

// responseInfo is what the header tap saw of an attempt's response.
type responseInfo struct {
	status int
	header http.Header
	// bodyErr is the first error reading the body other than its end.
	bodyErr error
}

// responseRecord is filled by the header tap and read by the attempt. The body of a stream is
// read after RoundTrip returns, hence the lock.
type responseRecord struct {
	mu   sync.Mutex
	info responseInfo
	// keepBody asks the tap for a copy of the body, up to maxKeptBody bytes; bodyTooLong says
	// that there was more.
	keepBody    bool
	body        []byte
	bodyTooLong bool
}

// maxKeptBody bounds the copy of a reply's body: a chat completion is far smaller.
const maxKeptBody = 32 << 20

// keptBody is the copy of the body the tap kept; false when it was longer than the bound.
func (r *responseRecord) keptBody() ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body, !r.bodyTooLong
}

func (r *responseRecord) get() responseInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// headerTap is the http.RoundTripper under go-openai. go-openai's errors carry the status
// but not the headers, so the tap notes the status, the retry headers and any failure to read
// the body in the record the request's context carries. When the record asks for it, the tap
// also keeps a copy of the body, which the client decodes with its own types.
type headerTap struct {
	base http.RoundTripper
}

func (t *headerTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	rec, _ := req.Context().Value(responseKey{}).(*responseRecord)
	if err != nil || rec == nil {
		return resp, err
	}
	h := http.Header{}
	for _, k := range []string{"Retry-After", "Retry-After-Ms"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	rec.mu.Lock()
	rec.info = responseInfo{status: resp.StatusCode, header: h}
	rec.mu.Unlock()
	resp.Body = &tapBody{ReadCloser: resp.Body, rec: rec}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base transport.
func (t *headerTap) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type tapBody struct {
	io.ReadCloser
	rec *responseRecord
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	if b.rec.keepBody && n > 0 {
		if len(b.rec.body)+n > maxKeptBody {
			b.rec.bodyTooLong = true
		} else {
			b.rec.body = append(b.rec.body, p[:n]...)
		}
	}
	if err != nil && err != io.EOF && b.rec.info.bodyErr == nil {
		b.rec.info.bodyErr = err
	}
	return n, err
}
