package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// makespan starts many runs at once through the real bot, store and model client against a
// slow model, and compares the time until the last one completed with the time one run
// needs on its own: its steps times the model's latency. A ratio near 1 means the bot adds
// nothing but the model's wait; what it adds beyond that is the cost of its own work
// (checkpoints, the outbox, HTTP) under load. It also reports the process's peak RSS.
//
// A step is one model consultation, as the agent counts them: a run of n steps asks for a
// tool call n-1 times and answers the n-th time.
func makespan(ctx context.Context, o options) ([]figure, error) {
	// Hand the heap of the earlier scenarios back to the system and restart the high-water
	// mark, so that the peak is this scenario's.
	debug.FreeOSMemory()
	peakNote := "VmHWM of this process, reset before the scenario"
	if err := resetPeakRSS(); err != nil {
		peakNote = fmt.Sprintf("VmHWM of this process, including the earlier scenarios (could not reset it: %v)", err)
	}

	db, closeStore, err := tempStore("loopbench-makespan-")
	if err != nil {
		return nil, err
	}
	defer closeStore()

	steps := o.makespanSteps
	// The fake model runs in a child process, so that the peak RSS is the bot's side (bot,
	// store, model client) and not the fake's, which keeps every request it was sent.
	modelURL, stopModel, err := startModelProcess(ctx, steps, o.makespanLatency)
	if err != nil {
		return nil, err
	}
	defer stopModel()
	client, err := llm.New(llm.Config{BaseURL: modelURL, Model: "m", MaxRetries: -1})
	if err != nil {
		return nil, fmt.Errorf("model client: %w", err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: steps + 10, NoProgressSteps: noProgressOff}, client, []agent.Tool{instantTool{name: "look", output: "a short result"}})
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}

	plat := &answerWatch{answered: make(chan struct{}, o.makespanRuns)}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := bot.New(bot.Config{MaxConcurrentRuns: o.makespanRuns}, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		return nil, fmt.Errorf("start bot: %w", err)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	defer b.Stop(stopCtx)

	start, accepted, last, err := burst(ctx, o, []*bot.Bot{b}, plat, db)
	if err != nil {
		return nil, err
	}
	peak, err := procStatusKB("/proc/self/status", "VmHWM")
	if err != nil {
		return nil, err
	}
	wall := last.Sub(start)
	ideal := time.Duration(steps) * o.makespanLatency
	return []figure{
		{Key: "makespan_ratio", Value: wall.Seconds() / ideal.Seconds(), Unit: "ratio",
			Note: fmt.Sprintf("%d runs started at once (one mention each, own channel, accepted in %s), %d steps each (%d tool calls + the answer) at %s model latency over HTTP, real store: last completed after %s, ideal %s",
				o.makespanRuns, accepted.Round(time.Millisecond), steps, steps-1, o.makespanLatency, wall.Round(time.Millisecond), ideal)},
		{Key: "peak_rss_mb", Value: float64(peak) / 1024, Unit: "MB",
			Note: peakNote + "; bot, store, model client and recording platform, the fake model being another process"},
	}, nil
}

// modelProcessEnv, set in the environment of loopbench (or its test binary), makes it serve
// the makespan scenario's model instead of measuring: see serveModel.
const modelProcessEnv = "LOOPBENCH_MAKESPAN_MODEL"

// startModelProcess starts this executable again as the makespan model server, for runs of
// steps steps at latency, and returns its base URL and a function that stops it.
func startModelProcess(ctx context.Context, steps int, latency time.Duration) (url string, stop func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("model process: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", modelProcessEnv, steps, latency))
	var logs lockedBuffer
	cmd.Stderr = &logs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, fmt.Errorf("model process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("model process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("model process: %w", err)
	}
	exited := make(chan error, 1)
	// The child serves until its stdin closes, which also happens when this process dies.
	stop = func() error {
		stdin.Close()
		select {
		case err := <-exited:
			exited <- err
			return err
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			return errors.New("model process did not stop within 10s")
		}
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout) // so that Wait does not race the read
		exited <- cmd.Wait()
	}()
	select {
	case first, ok := <-line:
		if ok && strings.HasPrefix(first, "http://") {
			return first, stop, nil
		}
		stop()
		return "", nil, fmt.Errorf("model process said %q, want its URL; its log:\n%s", first, logs.String())
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	cmd.Process.Kill()
	stop()
	return "", nil, errors.New("model process did not start within 30s")
}

// serveModel is the model process: spec is "steps,latency". It prints the server's base URL
// on out, then serves until in closes. Each run's request says how far the run got (one
// tool result per step done): it asks for a tool call until steps-1 are done, then answers.
func serveModel(spec string, in io.Reader, out io.Writer) error {
	stepsText, latencyText, ok := strings.Cut(spec, ",")
	steps, err := strconv.Atoi(stepsText)
	if !ok || err != nil || steps < 1 {
		return fmt.Errorf("%s=%q: want steps,latency", modelProcessEnv, spec)
	}
	latency, err := time.ParseDuration(latencyText)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", modelProcessEnv, spec, err)
	}
	srv := llmtest.New()
	srv.SetFallback(llmtest.Delay(latency, llmtest.Func(func(r llmtest.Request) llmtest.Step {
		done := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		if done < steps-1 && len(r.Tools) > 0 {
			return llmtest.ToolCalls(llmtest.Call("look", `{"n":`+strconv.Itoa(done)+`}`))
		}
		return llmtest.Text("done")
	})))
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.URL()); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, in)
	return err
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// answerWatch is a recorder that also tells, on answered, of every answer posted.
type answerWatch struct {
	recorder
	answered chan struct{}
}

func (w *answerWatch) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	ref, err := w.recorder.Post(ctx, th, msg)
	if msg.Kind == bot.KindAnswer {
		select {
		case w.answered <- struct{}{}:
		default:
			// More answers than runs: the count check after the wait reports it.
		}
	}
	return ref, err
}

// resetPeakRSS restarts the process's VmHWM at its current RSS. Linux does that when "5" is
// written to /proc/self/clear_refs (see proc(5)).
func resetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// procStatusKB reads one "Name:  N kB" line of a /proc/PID/status file.
func procStatusKB(path, name string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		v, ok := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		if !ok {
			return 0, fmt.Errorf("%s in %s: %q is not in kB", name, path, rest)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s in %s: %w", name, path, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s: no %s line", path, name)
}

// burst sends o.makespanRuns mentions at once, spread over bots in turn, waits for every
// answer on plat, and reads from db when the last run completed. It returns when the burst
// started, how long the bots took to accept it, and that last completion.
func burst(ctx context.Context, o options, bots []*bot.Bot, plat *answerWatch, db bot.Store) (start time.Time, accepted time.Duration, last time.Time, err error) {
	steps := o.makespanSteps
	// The mentions arrive as a burst, each in its own channel, handled concurrently as
	// adapters do; one channel would make the outbox's pacing of that channel the bottleneck.
	// Event IDs are unique to this burst, so that a database measured before claims none.
	start = time.Now()
	handled := make(chan error, o.makespanRuns)
	for i := range o.makespanRuns {
		go func() {
			th := bot.ThreadRef{Platform: benchThread.Platform, Channel: fmt.Sprintf("C%d", i), Thread: fmt.Sprintf("T%d", start.UnixNano())}
			_, err := bots[i%len(bots)].Handle(ctx, bot.Event{Kind: bot.EventMention, ID: fmt.Sprintf("ev-%d-%d", start.UnixNano(), i), Thread: th, User: benchUser, Text: "look around", At: time.Now()})
			handled <- err
		}()
	}
	var errs []error
	for range o.makespanRuns {
		if err := <-handled; err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return start, 0, last, fmt.Errorf("handle mentions: %w", err)
	}
	accepted = time.Since(start)

	// The answers are posted after the runs completed, paced per channel, so waiting for
	// them costs the bot nothing extra; the makespan itself is read from the stored records.
	limit := time.Duration(steps)*o.makespanLatency*20 + 2*time.Minute
	waitCtx, cancelWait := context.WithTimeout(ctx, limit)
	defer cancelWait()
	for n := range o.makespanRuns {
		select {
		case <-plat.answered:
		case <-waitCtx.Done():
			return start, accepted, last, fmt.Errorf("%d of %d answers posted: %w", n, o.makespanRuns, context.Cause(waitCtx))
		}
	}
	err = db.View(ctx, func(tx bot.Tx) error {
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil {
			return err
		}
		n := 0
		for _, r := range runs {
			if r.CreatedAt.Before(start) {
				continue // a run of an earlier measurement of the same database
			}
			n++
			if r.Status != agent.StatusCompleted || r.State.Step != steps {
				return fmt.Errorf("run %s ended %s after %d steps, want completed after %d", r.ID, r.Status, r.State.Step, steps)
			}
			// UpdatedAt is stamped by the checkpoint that completed the run.
			last = maxTime(last, r.UpdatedAt)
		}
		if n != o.makespanRuns {
			return fmt.Errorf("%d runs stored, want %d", n, o.makespanRuns)
		}
		return nil
	})
	if err != nil {
		return start, accepted, last, fmt.Errorf("read runs: %w", err)
	}
	return start, accepted, last, nil
}
