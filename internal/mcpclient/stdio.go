package mcpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// maxLine bounds one message a stdio server writes.
const maxLine = 64 << 20

// ConnectCommand starts cmd, a server that speaks MCP on its standard input and output (one
// JSON-RPC message a line), and makes the handshake within ctx. The process lives until
// Close; terminate is how long Close waits for it at each step of ending it (stdin closed,
// then SIGTERM, then SIGKILL).
func ConnectCommand(ctx context.Context, cmd *exec.Cmd, terminate time.Duration, opts Options) (*Session, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	s := newSession(opts)
	c := &stdioConn{cmd: cmd, stdin: stdin, terminate: terminate, exited: make(chan struct{})}
	s.conn = c
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	go c.read(s, stdout)
	if err := s.handshake(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// stdioConn is a server process spoken to over its stdin and stdout.
type stdioConn struct {
	cmd       *exec.Cmd
	terminate time.Duration

	mu    sync.Mutex // serialises writes
	stdin io.WriteCloser

	exited  chan struct{} // closed once the process is reaped
	waitErr error
	once    sync.Once
}

func (c *stdioConn) read(s *Session, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			s.fail(ErrConnectionClosed)
			return
		}
		line = append(line, part...)
		if len(line) > maxLine {
			s.fail(fmt.Errorf("%w: the server wrote a message of more than %d bytes", ErrConnectionClosed, maxLine))
			c.close()
			return
		}
		if isPrefix {
			continue
		}
		if len(line) > 0 {
			s.deliver(line)
		}
		line = nil
	}
}

func (c *stdioConn) send(ctx context.Context, msg []byte, call bool, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.exited:
		return ErrConnectionClosed
	default:
	}
	if _, err := c.stdin.Write(append(msg, '\n')); err != nil {
		if errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) {
			return ErrConnectionClosed
		}
		return fmt.Errorf("%w: %v", ErrConnectionClosed, err)
	}
	return nil
}

func (c *stdioConn) initialized(string) {}

// close ends the process: its stdin is closed, which ends a well-behaved server; one that
// lingers gets SIGTERM, then SIGKILL.
func (c *stdioConn) close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.stdin.Close()
		c.mu.Unlock()
		for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
			if sig != 0 {
				_ = c.cmd.Process.Signal(sig)
			}
			select {
			case <-c.exited:
				return
			case <-time.After(c.terminate):
			}
		}
		<-c.exited
	})
	return nil
}
