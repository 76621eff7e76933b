package bot

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// fakeGC is a runtime whose settings and samples a test sets, and whose collections it
// makes happen.
type fakeGC struct {
	percent int
	limit   int64
	s       gcSample
	hooks   []func()
	// samples counts the reads of the runtime's statistics, each a stop of the world.
	samples int
}

func (f *fakeGC) setGCPercent(v int) int {
	old := f.percent
	f.percent = v
	return old
}

func (f *fakeGC) setMemoryLimit(l int64) int64 {
	old := f.limit
	f.limit = l
	return old
}

func (f *fakeGC) sample() gcSample  { f.samples++; return f.s }
func (f *fakeGC) afterGC(fn func()) { f.hooks = append(f.hooks, fn) }

// collect runs the hooks of a collection that found s.
func (f *fakeGC) collect(s gcSample) {
	f.s = s
	hooks := f.hooks
	f.hooks = nil
	for _, h := range hooks {
		h()
	}
}

const mb = 1 << 20

// TestGCPacerFollowsTheRuns walks the pacer through a burst of runs: the default pacing
// while the runs in flight are few, the memory limit (1 MB a run, up to the most) once it
// leaves more room than the default pacing, the default pacing back when a collection
// finds the live heap too big for the limit and until the runs are over, and the
// runtime's own settings back when they are.
func TestGCPacerFollowsTheRuns(t *testing.T) {
	const most = 120
	rt := &fakeGC{percent: 75, limit: 1 << 40, s: gcSample{live: 10 * mb, scanned: 5 * mb, other: 30 * mb}}
	p := newGCPacer(rt, false)
	start := func(n int) {
		for range n {
			p.started(most)
		}
	}
	end := func(n int) {
		for range n {
			p.ended(most)
		}
	}
	want := func(step string, percent int, limit int64) {
		t.Helper()
		if rt.percent != percent || rt.limit != limit {
			t.Errorf("%s: GOGC %d and limit %d MB, want %d and %d MB", step, rt.percent, rt.limit/mb, percent, limit/mb)
		}
	}
	start(10)
	// 10 MB leave nothing above the 40 MB in use.
	want("10 runs", 75, 1<<40)
	start(50)
	// 60 runs ask for 48 MB (the limit moves in 16 MB steps), which leave 8 MB to allocate
	// above the 40 in use, less than the 15 the default pacing would.
	want("60 runs", 75, 1<<40)
	start(4)
	// 64 MB leave 24 MB.
	want("64 runs", -1, 64*mb)
	start(136)
	want("200 runs", -1, most*mb)
	rt.collect(gcSample{live: 30 * mb, scanned: 10 * mb, other: 40 * mb})
	// 120-70 = 50 MB of room against the default pacing's 40: the limit stays.
	want("a collection with room", -1, most*mb)
	rt.collect(gcSample{live: 45 * mb, scanned: 10 * mb, other: 40 * mb})
	// 120-85 = 35 MB against 55: the default pacing is back.
	want("a collection without room", 75, 1<<40)
	rt.s = gcSample{live: 5 * mb, scanned: 5 * mb, other: 30 * mb}
	start(10)
	end(10)
	if len(rt.hooks) != 0 {
		t.Error("the pacer still watches collections while the default pacing holds")
	}
	want("runs starting and ending while the limit was too tight", 75, 1<<40)
	end(200)
	want("no run in flight", 75, 1<<40)
	start(200)
	want("the next burst", -1, most*mb)
	end(200)
	want("the end of the burst", 75, 1<<40)
	if n := p.inFlight(); n != 0 {
		t.Errorf("%d runs in flight at the end, want 0", n)
	}
}

// TestGCPacerSamplesRarely checks that a burst of a thousand runs starting and ending reads
// the runtime's statistics, which stops the world, only where the limit's 16 MB steps change
// it (8 steps up to 120 MB, 8 down) and after collections, not at every run.
func TestGCPacerSamplesRarely(t *testing.T) {
	rt := &fakeGC{percent: 100, limit: 1 << 40, s: gcSample{live: 10 * mb, scanned: 5 * mb, other: 30 * mb}}
	p := newGCPacer(rt, false)
	for range 1000 {
		p.started(120)
	}
	for range 1000 {
		p.ended(120)
	}
	if rt.samples > 20 {
		t.Errorf("the runtime was sampled %d times for a burst of 1000 runs, want 20 at most", rt.samples)
	}
}

// TestGCPacerLeavesTheRuntimeAlone checks that nothing is set when the bot asks for the
// default pacing (a negative gc_memory_mb) or the environment set GOGC or GOMEMLIMIT, while
// the runs in flight are still counted.
func TestGCPacerLeavesTheRuntimeAlone(t *testing.T) {
	for _, tt := range []struct {
		name string
		off  bool
		most int
	}{{"default pacing asked for", false, -1}, {"GOGC or GOMEMLIMIT set", true, 120}} {
		t.Run(tt.name, func(t *testing.T) {
			rt := &fakeGC{percent: 100, limit: math.MaxInt64, s: gcSample{live: mb, other: mb}}
			p := newGCPacer(rt, tt.off)
			for range 500 {
				p.started(tt.most)
			}
			if rt.percent != 100 || rt.limit != math.MaxInt64 || len(rt.hooks) != 0 {
				t.Errorf("GOGC %d, limit %d, %d hooks: want the runtime untouched", rt.percent, rt.limit, len(rt.hooks))
			}
			if n := p.inFlight(); n != 500 {
				t.Errorf("%d runs in flight, want 500", n)
			}
		})
	}
}

// TestGCPacerOnTheRuntime puts the pacing in force on the runtime itself and takes it back,
// and sees a collection call the pacer back.
func TestGCPacerOnTheRuntime(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}()
	runtime.GC()
	called := make(chan struct{}, 1)
	p := newGCPacer(toldGC{called: called}, false)
	const runs = 1000
	for range runs {
		p.started(512)
	}
	if got := debug.SetMemoryLimit(-1); got != 512*mb {
		t.Errorf("memory limit %d MB with %d runs in flight, want 512 MB", got/mb, runs)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC %d with %d runs in flight, want off", got, runs)
	}
	// A collection calls the pacer back, which then watches for the next one.
	runtime.GC()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("no collection called the pacer back")
	}
	p.mu.Lock()
	watching := p.watching
	p.mu.Unlock()
	if !watching {
		t.Error("the pacer does not watch for the next collection")
	}
	for range runs {
		p.ended(512)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d after the runs, want none", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after the runs, want 100", got)
	}
}

// toldGC is the runtime, telling called whenever it calls the pacer back.
type toldGC struct {
	realGC
	called chan struct{}
}

func (g toldGC) afterGC(f func()) {
	g.realGC.afterGC(func() {
		f()
		select {
		case g.called <- struct{}{}:
		default:
		}
	})
}

// TestGCMemoryMBDefault checks gc_memory_mb's default and that a negative value, the
// default pacing, is kept.
func TestGCMemoryMBDefault(t *testing.T) {
	if got := (Config{}).Defaults().GCMemoryMB; got != defaultGCMemoryMB {
		t.Errorf("default gc_memory_mb %d, want %d", got, defaultGCMemoryMB)
	}
	if got := (Config{GCMemoryMB: -1}).Defaults().GCMemoryMB; got != -1 {
		t.Errorf("gc_memory_mb -1 became %d", got)
	}
}
