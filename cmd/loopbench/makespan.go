package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
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
	model, err := startModelProcess(ctx, o.makespanModel, steps, o.makespanLatency)
	if err != nil {
		return nil, err
	}
	defer model.stop()
	client, err := llm.New(llm.Config{BaseURL: model.url, Model: "m", MaxRetries: -1})
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

	br, err := modelBurst(ctx, o, model, []*bot.Bot{b}, plat, db)
	if err != nil {
		return nil, err
	}
	peak, err := procStatusKB("/proc/self/status", "VmHWM")
	if err != nil {
		return nil, err
	}
	wall := br.last.Sub(br.start)
	ideal := time.Duration(steps) * o.makespanLatency
	return []figure{
		{Key: "makespan_ratio", Value: wall.Seconds() / ideal.Seconds(), Unit: "ratio",
			Note: fmt.Sprintf("%d runs started at once (one mention each, own channel, accepted in %s), %d steps each (%d tool calls + the answer) at %s model latency over HTTP, real store: last completed after %s, ideal %s",
				o.makespanRuns, br.accepted.Round(time.Millisecond), steps, steps-1, o.makespanLatency, wall.Round(time.Millisecond), ideal)},
		{Key: "peak_rss_mb", Value: float64(peak) / 1024, Unit: "MB",
			Note: peakNote + "; bot, store, model client and recording platform, the fake model being another process"},
		{Key: "makespan_bot_cpu_s", Value: br.botCPU.Seconds(), Unit: "s",
			Note: "CPU time (user and system) of this process from the burst until the last answer was posted: bot, store, model client and recording platform"},
		{Key: "makespan_writes_per_run", Value: float64(br.writes) / float64(o.makespanRuns), Unit: "writes",
			Note: fmt.Sprintf("store writes (transactions asked for) meanwhile, over the runs: %d writes in %d commits of the one bbolt writer", br.writes, br.commits)},
		{Key: "makespan_written_mb", Value: float64(br.written) / (1 << 20), Unit: "MB",
			Note: "bytes of pages the store wrote meanwhile (bbolt's copy-on-write pages and a meta page a commit)"},
		{Key: "makespan_model_cpu_s", Value: br.modelCPU.Seconds(), Unit: "s",
			Note: fmt.Sprintf("CPU time of the fake model's process (%s) meanwhile, which shares the machine's cores with the bot as a real provider would not; it answered %d requests", o.makespanModel, br.requests)},
	}, nil
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

// burstFigures are what modelBurst measured.
type burstFigures struct {
	start    time.Time     // when the burst started
	accepted time.Duration // how long the bots took to accept it
	last     time.Time     // when the last run completed
	// botCPU is the CPU time of this process from the start until the last answer was
	// posted, and modelCPU the model process's meanwhile.
	botCPU, modelCPU time.Duration
	requests         int64 // the model was asked
	// writes, commits and written are the store's writes, its commits and the bytes of
	// pages it wrote meanwhile, when it counts them (writeCounter).
	writes, commits, written int64
}

// writeCounter is a store that counts its writes (the bbolt store).
type writeCounter interface {
	WriteCounts() (writes, commits int64)
	BytesWritten() int64
}

// countWrites returns what db has counted, zeros when it counts nothing.
func countWrites(db bot.Store) (writes, commits, written int64) {
	wc, ok := db.(writeCounter)
	if !ok {
		return 0, 0, 0
	}
	writes, commits = wc.WriteCounts()
	return writes, commits, wc.BytesWritten()
}

// modelBurst runs burst against model, and fails unless the model was asked each step of
// each run once.
func modelBurst(ctx context.Context, o options, model *modelProcess, bots []*bot.Bot, plat *answerWatch, db bot.Store) (burstFigures, error) {
	var f burstFigures
	modelBefore, err := model.stats(ctx)
	if err != nil {
		return f, err
	}
	cpuBefore, err := processCPU()
	if err != nil {
		return f, err
	}
	writes, commits, written := countWrites(db)
	region := trace.StartRegion(ctx, "makespan burst")
	var cpuAfter time.Duration
	var cpuErr error
	f.start, f.accepted, f.last, err = burst(ctx, o, bots, plat, db, func() {
		cpuAfter, cpuErr = processCPU()
		w, c, b := countWrites(db)
		f.writes, f.commits, f.written = w-writes, c-commits, b-written
	})
	region.End()
	if err != nil {
		return f, err
	}
	if cpuErr != nil {
		return f, cpuErr
	}
	modelAfter, err := model.stats(ctx)
	if err != nil {
		return f, err
	}
	if err := checkModelRequests(modelBefore, modelAfter, o.makespanRuns, o.makespanSteps); err != nil {
		return f, err
	}
	f.botCPU = cpuAfter - cpuBefore
	f.modelCPU = time.Duration((modelAfter.CPUSeconds - modelBefore.CPUSeconds) * float64(time.Second))
	f.requests = modelAfter.Requests - modelBefore.Requests
	return f, nil
}

// burst sends o.makespanRuns mentions at once, spread over bots in turn, waits for every
// answer on plat, calls answered, and reads from db when the last run completed. It returns when the burst
// started, how long the bots took to accept it, and that last completion.
func burst(ctx context.Context, o options, bots []*bot.Bot, plat *answerWatch, db bot.Store, answered func()) (start time.Time, accepted time.Duration, last time.Time, err error) {
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
	answered()
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
