package main

import (
	"compress/gzip"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
	"io"

	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the makespan scenario's model process and the ack
// scenario's fake Slack, as loopbench itself is when a scenario starts it again.
func TestMain(m *testing.M) {
	if child, err := serveAsChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "loopbench child process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	// The PostgreSQL cluster of the tests that asked for one (pgtest.URL).
	pgtest.Stop()
	os.Exit(code)
}

func TestChoose(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr bool
	}{
		{list: "step,prompt,chat", want: []string{"step", "prompt", "chat"}},
		{list: "chat, step", want: []string{"step", "chat"}},
		{list: "prompt,,prompt", want: []string{"prompt"}},
		{list: "step,nope", wantErr: true},
		{list: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := choose(tt.list)
		if (err != nil) != tt.wantErr {
			t.Errorf("choose(%q) error = %v, want error %v", tt.list, err, tt.wantErr)
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.name)
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("choose(%q) = %v, want %v", tt.list, names, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{in: nil, want: 0},
		{in: []time.Duration{5}, want: 5},
		{in: []time.Duration{9, 1, 5}, want: 5},
		{in: []time.Duration{8, 2, 4, 6}, want: 5},
	}
	for _, tt := range tests {
		if got := median(slices.Clone(tt.in)); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{in: nil, p: 50, want: 0},
		{in: []time.Duration{7}, p: 99, want: 7},
		{in: []time.Duration{1, 2, 3, 4}, p: 50, want: 2},
		{in: hundred, p: 50, want: 50},
		{in: hundred, p: 99, want: 99},
		{in: hundred, p: 100, want: 100},
		{in: hundred[:10], p: 99, want: 10},
	}
	for _, tt := range tests {
		if got := percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %d) = %v, want %v", len(tt.in), tt.p, got, tt.want)
		}
	}
}

func TestRecorderCounts(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name      string
		calls     []platformCall
		wantCalls int
		wantMax   int
		wantGap   time.Duration
	}{
		{name: "none", wantCalls: 0, wantMax: 0},
		{name: "paced a second apart", calls: []platformCall{
			{kind: "post", channel: "C1", at: at(0)},
			{kind: "update", channel: "C1", at: at(0)},
			{kind: "update", channel: "C1", at: at(1000)},
			{kind: "update", channel: "C1", at: at(2000)},
		}, wantCalls: 4, wantMax: 1, wantGap: time.Second},
		{name: "burst in one channel", calls: []platformCall{
			{kind: "update", channel: "C1", at: at(0)},
			{kind: "update", channel: "C1", at: at(400)},
			{kind: "update", channel: "C1", at: at(999)},
			{kind: "update", channel: "C1", at: at(1500)},
		}, wantCalls: 4, wantMax: 3, wantGap: 400 * time.Millisecond},
		{name: "channels counted apart", calls: []platformCall{
			{kind: "update", channel: "C1", at: at(0)},
			{kind: "update", channel: "C2", at: at(10)},
			{kind: "notify", channel: "C1", at: at(20)},
		}, wantCalls: 3, wantMax: 1},
	}
	for _, tt := range tests {
		r := &recorder{calls: tt.calls}
		calls, most := r.counts(time.Second)
		if calls != tt.wantCalls || most != tt.wantMax {
			t.Errorf("%s: counts = %d, %d; want %d, %d", tt.name, calls, most, tt.wantCalls, tt.wantMax)
		}
		if gap := r.minGap("update"); gap != tt.wantGap {
			t.Errorf("%s: minGap = %s, want %s", tt.name, gap, tt.wantGap)
		}
	}
}

func TestReportEndsWithJSON(t *testing.T) {
	var out bytes.Buffer
	figs := []figure{
		{Key: "a_us", Value: 12.5, Unit: "µs", Note: "first"},
		{Key: "b_ratio", Value: 0.25, Unit: "ratio", Note: "second"},
	}
	if err := report(&out, figs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var got map[string]float64
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line %q is not JSON: %v", lines[len(lines)-1], err)
	}
	if len(got) != 2 || got["a_us"] != 12.5 || got["b_ratio"] != 0.25 {
		t.Errorf("last line = %v, want both figures", got)
	}
	if len(lines) != 4 || !strings.Contains(lines[1], "a_us") || !strings.Contains(lines[2], "b_ratio") {
		t.Errorf("table = %q, want a header and one row per figure", lines[:len(lines)-1])
	}
}

// TestScenariosRunSmall runs every scenario at a small size: each must complete its runs
// and report the keys it promises. It checks no speed, only that the measurement works.
func TestScenariosRunSmall(t *testing.T) {
	got := figuresOf(t, "-scenarios=step,prompt,chat,ack,makespan", "-ack-events=20", "-step-runs=2", "-step-steps=3", "-prompt-steps=4", "-output-kb=1", "-prompt-budget=32000", "-chat-steps=3", "-chat-latency=1ms",
		"-makespan-runs=20", "-makespan-steps=3", "-makespan-latency=20ms")
	for _, key := range []string{"step_overhead_us", "checkpoint_bytes_per_step", "prompt_token_ratio", "cache_prefix_ratio", "cached_cost_ratio", "chat_calls", "max_edits_per_s", "makespan_ratio", "peak_rss_mb", "makespan_bot_cpu_s", "makespan_model_cpu_s", "makespan_writes_per_run", "makespan_write_wait_ms", "makespan_writer_busy", "makespan_written_mb", "ack_p50_ms", "ack_p99_ms"} {
		if _, ok := got[key]; !ok {
			t.Errorf("figures %v lack %s", got, key)
		}
	}
	// Every checkpoint commits, and a commit writes at least its meta page.
	if b := got["checkpoint_bytes_per_step"]; b < 4096 {
		t.Errorf("checkpoint_bytes_per_step = %v, want at least a page", b)
	}
	// Four outputs of at most 1.6 KB fit the budget and its 4000-byte output cap, so context
	// management changes nothing here.
	if r := got["prompt_token_ratio"]; r != 1 {
		t.Errorf("prompt_token_ratio = %v, want 1 for a task that fits the budget", r)
	}
	// Nothing is cut either, so each request repeats all of the one before, and a prefix
	// billed at the cached price makes the run cheaper than the uncached full history.
	if r := got["cache_prefix_ratio"]; r <= 0.5 || r >= 1 {
		t.Errorf("cache_prefix_ratio = %v, want between 0.5 and 1 for a task that fits the budget", r)
	}
	if r := got["cached_cost_ratio"]; r <= 0.5 || r >= 1 {
		t.Errorf("cached_cost_ratio = %v, want between 0.5 and 1", r)
	}
	if got["chat_calls"] < 2 {
		t.Errorf("chat_calls = %v, want at least a status card and an answer", got["chat_calls"])
	}
	if p50, p99 := got["ack_p50_ms"], got["ack_p99_ms"]; p50 <= 0 || p99 < p50 {
		t.Errorf("ack_p50_ms = %v, ack_p99_ms = %v; want 0 < p50 <= p99", p50, p99)
	}
	// No run can finish before its steps' model latency has passed.
	if r := got["makespan_ratio"]; r < 1 {
		t.Errorf("makespan_ratio = %v, want at least 1", r)
	}
	if mb := got["peak_rss_mb"]; mb <= 0 {
		t.Errorf("peak_rss_mb = %v, want a positive size", mb)
	}
	if s := got["makespan_bot_cpu_s"]; s <= 0 {
		t.Errorf("makespan_bot_cpu_s = %v, want some CPU time", s)
	}
	if s := got["makespan_model_cpu_s"]; s < 0 {
		t.Errorf("makespan_model_cpu_s = %v, want no less than none", s)
	}
	// A run of 3 steps is checkpointed at every step at least.
	if w := got["makespan_writes_per_run"]; w < 3 {
		t.Errorf("makespan_writes_per_run = %v, want at least the steps", w)
	}
	if mb := got["makespan_written_mb"]; mb <= 0 {
		t.Errorf("makespan_written_mb = %v, want some pages written", mb)
	}
	// Every write waits at least for its own commit, which the writer is busy with.
	if ms := got["makespan_write_wait_ms"]; ms <= 0 {
		t.Errorf("makespan_write_wait_ms = %v, want a positive wait", ms)
	}
	if r := got["makespan_writer_busy"]; r <= 0 || r > 1 {
		t.Errorf("makespan_writer_busy = %v, want a share of the burst", r)
	}
}

// TestMakespanModels runs the makespan scenario against each fake model: both answer the
// real client, and another name is refused.
func TestMakespanModels(t *testing.T) {
	for _, model := range []string{modelLean, modelLLMTest} {
		t.Run(model, func(t *testing.T) {
			got := figuresOf(t, "-scenarios=makespan", "-makespan-model="+model, "-makespan-runs=5", "-makespan-steps=2", "-makespan-latency=1ms")
			if r := got["makespan_ratio"]; r < 1 {
				t.Errorf("makespan_ratio = %v, want at least 1", r)
			}
		})
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-scenarios=makespan", "-makespan-model=remote"}, &out); err == nil || !strings.Contains(err.Error(), "-makespan-model") {
		t.Errorf("run with -makespan-model=remote: %v, want the flag refused", err)
	}
}

// TestTraceFlag takes an execution trace of a small makespan scenario and of a small ack
// scenario: each names its burst, which is what a reader of go tool trace looks for.
func TestTraceFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.out")
	figuresOf(t, "-scenarios=makespan", "-trace="+path, "-makespan-runs=3", "-makespan-steps=2", "-makespan-latency=1ms")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"makespan burst", "store: group"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the trace (%d bytes) does not name %q", len(data), want)
		}
	}
	// The ack scenario marks its burst, sent from the fake's process, in this one's trace.
	figuresOf(t, "-scenarios=ack", "-trace="+path, "-ack-events=5")
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"burst start", "burst acknowledged"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the ack scenario's trace (%d bytes) does not name %q", len(data), want)
		}
	}
}

// TestMemProfileFlag: -memprofile writes pprof's allocation profile (gzipped protobuf),
// whose samples name the scenario's own code.
func TestMemProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem.out")
	figuresOf(t, "-scenarios=makespan", "-memprofile="+path, "-makespan-runs=3", "-makespan-steps=2", "-makespan-latency=1ms")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the memory profile is not gzipped: %v", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The profile's string table holds its sample types and the functions of its stacks.
	for _, want := range []string{"alloc_space", "github.com/loopbot/loopbot/bot.(*scheduler).work"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the memory profile (%d bytes) does not name %q", len(data), want)
		}
	}
}

func TestCheckModelRequests(t *testing.T) {
	stats := func(requests, calls, texts, refused int64) modelStats {
		return modelStats{LeanStats: llmtest.LeanStats{Requests: requests, ToolCalls: calls, Texts: texts, Refused: refused}, CPUSeconds: 1}
	}
	before := stats(10, 6, 3, 1) // an earlier measurement's
	tests := []struct {
		name    string
		after   modelStats
		wantErr bool
	}{
		{"every step once", stats(10+15, 6+10, 3+5, 1), false},
		{"a step asked twice", stats(10+16, 6+11, 3+5, 1), true},
		{"a run one step short", stats(10+14, 6+9, 3+5, 1), true},
		{"a run that never answered", stats(10+15, 6+11, 3+4, 1), true},
		{"a request refused", stats(10+16, 6+10, 3+5, 2), true},
	}
	for _, tt := range tests {
		if err := checkModelRequests(before, tt.after, 5, 3); (err != nil) != tt.wantErr {
			t.Errorf("%s: checkModelRequests = %v, want error %v", tt.name, err, tt.wantErr)
		}
	}
}

// TestStartupRunsBinary builds and starts the real loopbot binary twice and checks that the
// startup scenario reports its figures: the resident set, its split into the process's own
// memory and mapped file pages and into the binary's sections, and the heap as the runtime
// counts it.
func TestStartupRunsBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the loopbot binary")
	}
	got := figuresOf(t, "-scenarios=startup", "-startup-runs=2", "-idle=100ms")
	if len(got) != 6+len(residentParts) || got["startup_ms"] <= 0 || got["idle_rss_mb"] <= 0 || got["binary_mb"] <= 0 {
		t.Errorf("figures = %v, want positive startup_ms, idle_rss_mb and binary_mb and the parts", got)
	}
	for _, k := range []string{"idle_anon_mb", "idle_file_mb", "idle_heap_inuse_mb", "idle_text_mb", "idle_pclntab_mb"} {
		if got[k] <= 0 || got[k] > got["idle_rss_mb"] {
			t.Errorf("%s = %v, want a positive part of idle_rss_mb %v", k, got[k], got["idle_rss_mb"])
		}
	}
	var sum float64
	for _, p := range residentParts {
		sum += got["idle_"+p+"_mb"]
	}
	if rss := got["idle_rss_mb"]; sum < rss*0.9 || sum > rss*1.1 {
		t.Errorf("the parts add up to %v MB, want about idle_rss_mb %v", sum, rss)
	}
}

func TestPromValue(t *testing.T) {
	text := "# HELP go_memstats_heap_inuse_bytes x\n# TYPE go_memstats_heap_inuse_bytes gauge\n" +
		"go_memstats_heap_inuse_bytes_total 9\ngo_memstats_heap_inuse_bytes 2.818048e+06\nother{a=\"b\"} 1\n"
	tests := []struct {
		name string
		want float64
		ok   bool
	}{
		{"go_memstats_heap_inuse_bytes", 2818048, true},
		{"go_memstats_heap_inuse", 0, false}, // a prefix of a name is not the name
		{"other", 0, false},                  // labelled samples are not read
		{"missing", 0, false},
	}
	for _, tt := range tests {
		got, ok := promValue(text, tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("promValue(%s) = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestProcStatusKB(t *testing.T) {
	status := "Name:\tloopbot\nVmHWM:\t  145556 kB\nVmRSS:\t   19592 kB\nThreads:\t7\n"
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte(status), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		want    int64
		wantErr bool
	}{
		{name: "VmHWM", want: 145556},
		{name: "VmRSS", want: 19592},
		{name: "Threads", wantErr: true}, // not in kB
		{name: "VmSwap", wantErr: true},  // no such line
		{name: "VmRS", wantErr: true},    // a prefix of a name is not the name
	}
	for _, tt := range tests {
		got, err := procStatusKB(path, tt.name)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("procStatusKB(%s) = %d, %v; want %d, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestPeakRSSReset checks that writing to clear_refs restarts VmHWM here, which the
// makespan scenario relies on to report its own peak rather than an earlier scenario's.
func TestPeakRSSReset(t *testing.T) {
	if _, err := procStatusKB("/proc/self/status", "VmHWM"); err != nil {
		t.Skip(err)
	}
	hwm := func() int64 {
		t.Helper()
		kb, err := procStatusKB("/proc/self/status", "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		return kb
	}
	reset := func() {
		t.Helper()
		debug.FreeOSMemory()
		if err := resetPeakRSS(); err != nil {
			t.Fatal(err)
		}
	}
	reset()
	before := hwm()
	// Raise the mark well above the current RSS, then give the memory back.
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = 1
	}
	raised := hwm()
	if raised < before+60<<10 {
		t.Fatalf("VmHWM went from %d kB to %d kB after touching 64 MB", before, raised)
	}
	runtime.KeepAlive(big)
	reset()
	if after := hwm(); after >= raised-32<<10 {
		t.Errorf("VmHWM is %d kB after the reset, want well under the %d kB it had reached", after, raised)
	}
}

// figuresOf runs loopbench with args and returns the figures of its last line, which must be
// one JSON object.
func figuresOf(t *testing.T, args ...string) map[string]float64 {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), args, &out); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var got map[string]float64
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line %q is not JSON: %v", lines[len(lines)-1], err)
	}
	return got
}

// TestPlannerScenarioRunsSmall runs the planner scenario at a small size: both ways must
// complete as scripted and report both ratios. It checks no speed.
func TestPlannerScenarioRunsSmall(t *testing.T) {
	got := figuresOf(t, "-scenarios=planner", "-plan-parts=2", "-plan-fetches=2", "-output-kb=1", "-plan-latency=1ms")
	for _, key := range []string{"planner_token_ratio", "planner_makespan_ratio"} {
		if r, ok := got[key]; !ok || r <= 0 {
			t.Errorf("figures %v lack a positive %s", got, key)
		}
	}
}

// TestAutonomyCorpus runs the corpus: no attack call runs unapproved at any level, and each
// bolder level asks a benign run no more than the one before.
func TestAutonomyCorpus(t *testing.T) {
	got := figuresOf(t, "-scenarios=autonomy")
	if got["unsafe_unapproved"] != 0 {
		t.Errorf("unsafe_unapproved = %v, want 0", got["unsafe_unapproved"])
	}
	careful, balanced, bold := got["approvals_per_benign_run_careful"], got["approvals_per_benign_run_balanced"], got["approvals_per_benign_run_bold"]
	if !(careful > balanced && balanced >= bold && bold > 0) {
		t.Errorf("approvals per benign run: careful %v, balanced %v, bold %v; want careful > balanced >= bold > 0 (tests always ask)", careful, balanced, bold)
	}
}
