package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
)

// The ack scenario's fake Slack runs in a child process by default (-ack-fake=process), as
// Slack's servers are not in the bot's process: in this one, the fake's sender and its ack
// reader would share the bot's Go scheduler and garbage collector, and its ack reader, waiting
// for a core behind the bot's receiving loop, would read most acks at the burst's end and
// count that wait as the bot's. -ack-fake=inline runs it in this process, as before, to
// compare. Either way the figure is slackfake's own: each envelope stamped just before its
// frame is written, its ack stamped right after it is read, matched by envelope ID.
//
// The child (child_process.go) prints its Web API URL, then answers these lines:
//
//	connections N        "ok" once N Socket Mode connections have been accepted
//	prepare N [drop ID]  "ok" once envelopes env-0 .. env-N-1 (ackBurst) are made; with
//	                     drop, the connection will be dropped at the ack of envelope ID,
//	                     for the test that a redelivery fails the scenario
//	burst                "ok" once the prepared envelopes are sent back to back and as
//	                     many acks are read
//	acks                 a JSON line of the acks read (ackRecord), in order
//	close                "ok" once the fake is closed (its records stay)
//
// and an error as "error: text".

// slackProcessEnv, set in the environment of loopbench (or its test binary), makes it serve
// the ack scenario's fake Slack instead of measuring: see serveSlack.
const slackProcessEnv = "LOOPBENCH_SLACK_FAKE"

// Where the ack scenario's fake Slack runs, for -ack-fake.
const (
	ackFakeProcess = "process"
	ackFakeInline  = "inline"
)

// slackEnd is a fake Slack the bot's adapter talks to.
type slackEnd interface {
	APIURL() string
	WaitConnections(ctx context.Context, n int) error
	// close closes the fake; its records stay readable.
	close() error
}

// ackSlack is the ack scenario's fake Slack, in this process or in a child.
type ackSlack interface {
	slackEnd
	// prepare makes the burst's n envelopes (ackBurst); with drop, the connection will be
	// dropped at the ack of envelope drop.
	prepare(ctx context.Context, n int, drop string) error
	// burst sends the prepared envelopes back to back and waits for their acks.
	burst(ctx context.Context) error
	// acks returns the acks read so far, in order.
	acks(ctx context.Context) ([]ackRecord, error)
}

// ackRecord is one ack the fake read: the envelope it acknowledged, how many times that
// envelope had been written, and the time from its latest write to the ack's read.
type ackRecord struct {
	EnvelopeID string        `json:"id"`
	Deliveries int           `json:"deliveries"`
	Latency    time.Duration `json:"latency_ns"`
}

// ackBurst makes the burst's envelope IDs and payloads: app_mentions, each in its own
// channel, so that the outbox, which paces each channel, can post every run's card while
// the bot stops, instead of one a second. They are made before the burst, so that what
// the fake does while it sends is only writing the frames.
func ackBurst(n int) (ids []string, payloads []json.RawMessage, err error) {
	ids, payloads = make([]string, n), make([]json.RawMessage, n)
	for i := range n {
		ids[i] = fmt.Sprintf("env-%d", i)
		ts := fmt.Sprintf("1700000000.%06d", i+1)
		if payloads[i], err = json.Marshal(mention(fmt.Sprintf("Ev%d", i), fmt.Sprintf("C%d", i), ts, "check the build")); err != nil {
			return nil, nil, fmt.Errorf("encode envelope %d: %w", i, err)
		}
	}
	return ids, payloads, nil
}

// inlineSlack is slackfake's Server in this process.
type inlineSlack struct {
	*slackfake.Server
	// ids and payloads are the prepared burst's.
	ids      []string
	payloads []json.RawMessage
}

func newInlineSlack() (*inlineSlack, error) {
	s, err := slackfake.New()
	return &inlineSlack{Server: s}, err
}

func (s *inlineSlack) close() error {
	s.Close()
	return nil
}

func (s *inlineSlack) prepare(_ context.Context, n int, drop string) error {
	var err error
	if s.ids, s.payloads, err = ackBurst(n); err != nil {
		return err
	}
	if drop != "" {
		s.DropConnectionOnAck(drop)
	}
	return nil
}

func (s *inlineSlack) burst(ctx context.Context) error {
	for i, p := range s.payloads {
		if err := s.Send("events_api", s.ids[i], p); err != nil {
			return fmt.Errorf("send envelope %d: %w", i, err)
		}
	}
	// The wait runs on the cores the burst shares: it wakes once, at the last ack, rather
	// than at every ack the fake reads.
	if err := s.WaitAcks(ctx, len(s.ids)); err != nil {
		return fmt.Errorf("%d of %d envelopes acknowledged: %w", s.AckCount(), len(s.ids), err)
	}
	return nil
}

func (s *inlineSlack) acks(context.Context) ([]ackRecord, error) {
	acks := s.Acks()
	out := make([]ackRecord, len(acks))
	for i, a := range acks {
		out[i] = ackRecord{EnvelopeID: a.EnvelopeID, Deliveries: a.Deliveries, Latency: a.Latency()}
	}
	return out, nil
}

// slackProcess is the fake Slack in a child process.
type slackProcess struct {
	*childProcess
	url    string
	closed bool
}

func startSlackProcess(ctx context.Context) (*slackProcess, error) {
	child, first, err := startChild(ctx, "slack process", slackProcessEnv+"=1")
	if err != nil {
		return nil, err
	}
	return &slackProcess{childProcess: child, url: first}, nil
}

func (p *slackProcess) APIURL() string { return p.url }

// command asks the child and returns its answer, or the error it answered.
func (p *slackProcess) command(ctx context.Context, command string, limit time.Duration) (string, error) {
	l, err := p.ask(ctx, command, limit)
	if err != nil {
		return "", err
	}
	if text, ok := strings.CutPrefix(l, "error: "); ok {
		return "", fmt.Errorf("slack process: %s", text)
	}
	return l, nil
}

func (p *slackProcess) WaitConnections(ctx context.Context, n int) error {
	_, err := p.command(ctx, fmt.Sprintf("connections %d", n), time.Minute)
	return err
}

func (p *slackProcess) prepare(ctx context.Context, n int, drop string) error {
	command := fmt.Sprintf("prepare %d", n)
	if drop != "" {
		command += " drop " + drop
	}
	_, err := p.command(ctx, command, time.Minute)
	return err
}

func (p *slackProcess) burst(ctx context.Context) error {
	_, err := p.command(ctx, "burst", 3*time.Minute)
	return err
}

func (p *slackProcess) acks(ctx context.Context) ([]ackRecord, error) {
	l, err := p.command(ctx, "acks", time.Minute)
	if err != nil {
		return nil, err
	}
	var acks []ackRecord
	if err := json.Unmarshal([]byte(l), &acks); err != nil {
		return nil, fmt.Errorf("slack process acks: %w", err)
	}
	return acks, nil
}

// close closes the child's fake, whose records stay for acks; stop ends the child.
func (p *slackProcess) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	_, err := p.command(context.Background(), "close", time.Minute)
	return err
}

// serveSlack is the fake Slack's process: it prints the fake's Web API URL on out, then
// answers the command lines read from in until in closes.
func serveSlack(in io.Reader, out io.Writer) error {
	fake, err := newInlineSlack()
	if err != nil {
		return err
	}
	defer fake.Close()
	if _, err := fmt.Fprintln(out, fake.APIURL()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		answer, err := slackCommand(fake, sc.Text())
		if err != nil {
			answer = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

// slackCommand carries out one command line of the fake's process and returns its answer.
func slackCommand(fake *inlineSlack, line string) (string, error) {
	ctx := context.Background()
	f := strings.Fields(line)
	switch {
	case len(f) == 2 && f[0] == "connections":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return "", fmt.Errorf("connections %q: %w", f[1], err)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return "ok", fake.WaitConnections(ctx, n)
	case (len(f) == 2 || len(f) == 4 && f[2] == "drop") && f[0] == "prepare":
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			return "", fmt.Errorf("prepare %q: want a positive number of envelopes", f[1])
		}
		drop := ""
		if len(f) == 4 {
			drop = f[3]
		}
		return "ok", fake.prepare(ctx, n, drop)
	case len(f) == 1 && f[0] == "burst":
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return "ok", fake.burst(ctx)
	case len(f) == 1 && f[0] == "acks":
		acks, _ := fake.acks(ctx)
		b, err := json.Marshal(acks)
		return string(b), err
	case len(f) == 1 && f[0] == "close":
		return "ok", fake.close()
	}
	return "", fmt.Errorf("unknown command %q", line)
}
