package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Some scenarios run a fake in a child process, so that what this process measures (its CPU
// time, its peak RSS, the latency of what it answers) is the bot's side and not the fake's:
// the makespan scenarios' model (model_process.go) and the ack scenario's Slack
// (slack_process.go). The child is this executable started again with an environment
// variable that says which fake to be. The two processes talk in lines over the child's
// stdin and stdout: the child first prints its address, then answers each command line with
// one line, and exits when its stdin closes. Its stderr is kept for the errors.

// maxChildLine is the longest line a child may answer: the ack scenario's acks, one JSON
// line of about 60 bytes an envelope, for any -ack-events a run would use.
const maxChildLine = 64 << 20

// serveAsChild runs this process as one of the children when its environment names one,
// and reports whether it did; err is the child's failure.
func serveAsChild() (bool, error) {
	if spec := os.Getenv(modelProcessEnv); spec != "" {
		return true, serveModel(spec, os.Stdin, os.Stdout)
	}
	if os.Getenv(slackProcessEnv) != "" {
		return true, serveSlack(os.Stdin, os.Stdout)
	}
	return false, nil
}

// childProcess is a running child.
type childProcess struct {
	name   string // for errors: "model process"
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the child's output lines after its first
	exited chan error
	logs   *lockedBuffer
}

// startChild starts this executable again with env added to its environment, and returns
// it with the first line it printed, its URL.
func startChild(ctx context.Context, name, env string) (*childProcess, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env)
	p := &childProcess{name: name, cmd: cmd, lines: make(chan string, 1), exited: make(chan error, 1), logs: &lockedBuffer{}}
	cmd.Stderr = p.logs
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, maxChildLine)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		io.Copy(io.Discard, stdout) // so that Wait does not race the read
		p.exited <- cmd.Wait()
	}()
	first, err := p.line(ctx, 30*time.Second)
	if err != nil {
		p.kill()
		return nil, "", fmt.Errorf("%s: %w; its log:\n%s", name, err, p.logs.String())
	}
	if !strings.HasPrefix(first, "http://") {
		p.stop()
		return nil, "", fmt.Errorf("%s said %q, want its URL; its log:\n%s", name, first, p.logs.String())
	}
	return p, first, nil
}

// line returns the child's next output line.
func (p *childProcess) line(ctx context.Context, limit time.Duration) (string, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", errors.New("it ended its output")
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("no answer within %s", limit)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// ask writes command to the child and returns its answer, waiting at most limit.
func (p *childProcess) ask(ctx context.Context, command string, limit time.Duration) (string, error) {
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	l, err := p.line(ctx, limit)
	if err != nil {
		return "", fmt.Errorf("%s: %w; its log:\n%s", p.name, err, p.logs.String())
	}
	return l, nil
}

// stop closes the child's stdin, which ends it, and waits for it.
func (p *childProcess) stop() error {
	p.stdin.Close()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			return fmt.Errorf("%s: %w; its log:\n%s", p.name, err, p.logs.String())
		}
		return nil
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within 10s", p.name)
	}
}

func (p *childProcess) kill() {
	p.cmd.Process.Kill()
	p.stop()
}
