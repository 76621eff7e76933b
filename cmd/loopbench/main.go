package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"text/tabwriter"
	"time"
)

// options are the sizes the scenarios run at, set by flags.
type options struct {
	stepRuns     int
	stepSteps    int
	promptSteps  int
	outputKB     int
	promptBudget int
	chatSteps    int
	chatLatency  time.Duration

	makespanRuns    int
	makespanSteps   int
	makespanLatency time.Duration
	makespanModel   string

	ackEvents int
	ackFake   string
	// ackDrop, set by tests, drops the Socket Mode connection at the ack of this envelope.
	ackDrop string

	planParts   int
	planFetches int
	planLatency time.Duration

	startupRuns int
	idle        time.Duration
	loopbot     string

	databaseURL string
	replicas    int
}

// figure is one measured value: Key names it in the JSON line, Note says in the table how
// it was measured, so the table can be read without this source.
type figure struct {
	Key   string
	Value float64
	Unit  string
	Note  string
}

// scenario is one measurement. run returns its figures or an error when the scenario could
// not run as designed (a run that did not complete, a store that would not open), since a
// figure from a broken run would mislead.
type scenario struct {
	name string
	run  func(ctx context.Context, o options) ([]figure, error)
}

// scenarios are all the measurements, in the order they run and print.
var scenarios = []scenario{
	{name: "step", run: stepOverhead},
	{name: "step-postgres", run: stepPostgres},
	{name: "prompt", run: promptTokenRatio},
	{name: "chat", run: chatCalls},
	{name: "ack", run: ackLatency},
	{name: "makespan", run: makespan},
	{name: "makespan-replicas", run: makespanReplicas},
	{name: "planner", run: plannerRatio},
	{name: "startup", run: startup},
	{name: "autonomy", run: autonomyCorpus},
}

func main() {
	if child, err := serveAsChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "loopbench child process:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package has printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (retErr error) {
	fs := flag.NewFlagSet("loopbench", flag.ContinueOnError)
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	pick := fs.String("scenarios", strings.Join(names, ","), "comma-separated scenarios to run: "+strings.Join(names, ", "))
	var o options
	fs.IntVar(&o.stepRuns, "step-runs", 20, "step: runs to measure")
	fs.IntVar(&o.stepSteps, "step-steps", 50, "step: tool steps in each run")
	fs.IntVar(&o.replicas, "replicas", 3, "makespan-replicas: bots sharing the database")
	fs.StringVar(&o.databaseURL, "database-url", "", "step-postgres and makespan-replicas: the PostgreSQL database to use; empty takes LOOPBOT_DATABASE_URL, and without either those scenarios measure nothing")
	fs.IntVar(&o.promptSteps, "prompt-steps", 30, "prompt: tool calls the scripted task makes before it answers")
	fs.IntVar(&o.outputKB, "output-kb", 8, "prompt: mean size of the tool outputs in KB")
	fs.IntVar(&o.promptBudget, "prompt-budget", 12000, "prompt: ContextTokens of the run with context management")
	fs.IntVar(&o.chatSteps, "chat-steps", 50, "chat: model steps of the run")
	fs.DurationVar(&o.chatLatency, "chat-latency", 100*time.Millisecond, "chat: latency of each model reply")
	fs.IntVar(&o.ackEvents, "ack-events", 500, "ack: app_mention envelopes in the burst")
	fs.StringVar(&o.ackFake, "ack-fake", ackFakeProcess, "ack: where the fake Slack runs, "+ackFakeProcess+" (a child process, as Slack is not in the bot's) or "+ackFakeInline+" (this process, sharing the bot's scheduler and garbage collector)")
	fs.IntVar(&o.makespanRuns, "makespan-runs", 1000, "makespan: runs started at once")
	fs.IntVar(&o.makespanSteps, "makespan-steps", 5, "makespan: model steps of each run, the last one answering")
	fs.DurationVar(&o.makespanLatency, "makespan-latency", 200*time.Millisecond, "makespan: latency of each model reply")
	fs.StringVar(&o.makespanModel, "makespan-model", modelLean, "makespan and makespan-replicas: the fake model, "+modelLean+" (reads each request as a stream of tokens and keeps nothing) or "+modelLLMTest+" (llmtest's Server, which decodes and keeps every request)")
	fs.IntVar(&o.planParts, "plan-parts", 3, "planner: independent parts of the task, each a plan step")
	fs.IntVar(&o.planFetches, "plan-fetches", 4, "planner: tool calls of each part (of -output-kb KB each)")
	fs.DurationVar(&o.planLatency, "plan-latency", 50*time.Millisecond, "planner: latency of each model reply")
	fs.IntVar(&o.startupRuns, "startup-runs", 5, "startup: starts of the binary to take the median of")
	fs.DurationVar(&o.idle, "idle", 10*time.Second, "startup: how long the last start sits idle before its RSS is read")
	fs.StringVar(&o.loopbot, "loopbot", "", "startup: the loopbot binary to start; empty builds ./cmd/loopbot of this module")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the chosen scenarios to this file")
	traceFile := fs.String("trace", "", "write an execution trace of the chosen scenarios to this file, for go tool trace")
	memProfile := fs.String("memprofile", "", "write a profile of what the chosen scenarios allocated to this file (go tool pprof -sample_index=alloc_space)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.stepRuns < 1 || o.stepSteps < 1 || o.promptSteps < 1 || o.outputKB < 1 || o.promptBudget < 1 || o.chatSteps < 1 || o.chatLatency < 0 ||
		o.makespanRuns < 1 || o.makespanSteps < 1 || o.makespanLatency <= 0 || o.startupRuns < 1 || o.idle < 0 || o.ackEvents < 1 ||
		o.planParts < 1 || o.planFetches < 1 || o.planLatency < 0 || o.replicas < 1 {
		return fmt.Errorf("sizes must be positive")
	}
	if o.ackFake != ackFakeProcess && o.ackFake != ackFakeInline {
		return fmt.Errorf("-ack-fake is %s or %s, not %q", ackFakeProcess, ackFakeInline, o.ackFake)
	}
	if o.makespanModel != modelLean && o.makespanModel != modelLLMTest {
		return fmt.Errorf("-makespan-model is %s or %s, not %q", modelLean, modelLLMTest, o.makespanModel)
	}
	chosen, err := choose(*pick)
	if err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		defer trace.Stop()
	}

	if *memProfile != "" {
		defer func() {
			if err := writeMemProfile(*memProfile); err != nil && retErr == nil {
				retErr = err
			}
		}()
	}

	var figs []figure
	for _, s := range chosen {
		fmt.Fprintf(os.Stderr, "loopbench: running %s\n", s.name)
		f, err := s.run(ctx, o)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
		figs = append(figs, f...)
	}
	return report(out, figs)
}

// choose returns the scenarios named in a comma-separated list, in table order.
func choose(list string) ([]scenario, error) {
	want := map[string]bool{}
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []scenario
	for _, s := range scenarios {
		if want[s.name] {
			out = append(out, s)
			delete(want, s.name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown scenario %q", n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario chosen")
	}
	return out, nil
}

// report prints the table and then the JSON object, which must stay the last line.
func report(out io.Writer, figs []figure) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tUNIT\tNOTE")
	values := make(map[string]float64, len(figs))
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t%.4g\t%s\t%s\n", f.Key, f.Value, f.Unit, f.Note)
		values[f.Key] = f.Value
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print table: %w", err)
	}
	line, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("encode figures: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", line)
	return err
}

// writeMemProfile writes the runtime's profile of every allocation since the process started
// (pprof's "allocs"), which for loopbench is the scenarios' with little besides.
func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	return nil
}
