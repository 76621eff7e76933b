package bot

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// The garbage collector's pacing while many runs are in flight (Config.GCMemoryMB).
//
// Go collects when the heap has grown by as much as was live after the last collection
// (GOGC=100), and every collection scans the stack of every goroutine: each run has one,
// and each HTTP/1.1 connection to the model two. With a thousand runs at once most of
// what a step allocates is garbage by the next step, the live heap is small beside the
// stacks, and the collector ran twenty-odd times in the makespan scenario, which was about
// a sixth of the bot's CPU. So while runs are in flight the pacer lets the heap grow to a
// memory limit instead (the runtime's soft limit, with GOGC off), and collects once the
// process's Go memory reaches it:
//
//   - the limit grows with the work: gcMemoryPerRun for each run in flight, up to the
//     configured most, so that a bot with a few runs keeps the default pacing and its small
//     heap;
//   - it is in force only while it leaves more room to allocate than the default pacing
//     would (the live heap plus the stacks and globals the collector scans). A collection
//     that finds less puts the default pacing back until no run is in flight, so a live
//     heap near or over the limit never makes the collector run more often than it would
//     without one;
//   - when no run is in flight the default pacing and the runtime's own limit are back, so
//     an idle bot's heap does not grow towards the limit.
//
// GOGC or GOMEMLIMIT in the environment are the operator's choice: the pacer then does
// nothing.

// gcMemoryPerRun is the memory limit's share of each run in flight. The limit moves in
// steps of gcMemoryStep, so that a burst of runs starting and ending changes it, and reads
// the runtime's statistics (which stops the world), a few times rather than at every run:
// a trace of the makespan scenario counted 122 such stops, 38 ms in all, with 1 MB steps.
const (
	gcMemoryPerRun = 1 << 20
	gcMemoryStep   = 16 << 20
)

// gcSample is what the pacer reads of the runtime.
type gcSample struct {
	// live is the heap live after the last collection; scanned adds the stacks and
	// globals the collector scans, which the default pacing lets the heap grow by too.
	live, scanned uint64
	// other is the Go memory the limit counts that is not the heap's: goroutine stacks and
	// the runtime's own structures. The heap's free memory is not counted, being reused
	// before the heap grows.
	other uint64
}

// defaultRoom is what the default pacing lets the heap grow by before it collects.
func (s gcSample) defaultRoom() uint64 { return s.live + s.scanned }

// room is what the heap may grow by before the Go memory reaches limit.
func (s gcSample) room(limit int64) uint64 {
	used := s.other + s.live
	if limit <= 0 || uint64(limit) <= used {
		return 0
	}
	return uint64(limit) - used
}

// gcRuntime is the part of the runtime the pacer sets and reads; tests fake it.
type gcRuntime interface {
	setGCPercent(p int) (old int)
	setMemoryLimit(l int64) (old int64)
	sample() gcSample
	// afterGC calls f once, after the next collection.
	afterGC(f func())
}

// gcPacer sets the collector's pacing for the runs in flight of every bot of the process,
// which share one heap.
type gcPacer struct {
	rt gcRuntime
	// off is set when the environment sets GOGC or GOMEMLIMIT.
	off bool

	mu sync.Mutex
	// runs counts the runs in flight, paced those of bots that want the pacing; most is
	// the limit's most, in bytes (the largest configured by a bot with runs in flight; a
	// process has one configuration).
	runs, paced int
	most        int64
	// limit is the limit in force, zero while the default pacing is.
	limit int64
	// tight is set when a collection found the limit leaving less room than the default
	// pacing; it holds until no run is in flight.
	tight bool
	// declined is a limit found to leave too little room since the last collection; it is
	// not sampled for again until the next.
	declined int64
	// watching is set while an afterGC call is pending.
	watching bool
	// percent and memLimit are the runtime's settings from before the pacer changed them.
	percent  int
	memLimit int64
}

// pacer is the process's gcPacer.
var pacer = newGCPacer(realGC{}, os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "")

func newGCPacer(rt gcRuntime, off bool) *gcPacer { return &gcPacer{rt: rt, off: off} }

// started tells of a run that is now in flight in a bot whose limit's most is mostMB (not
// positive: the bot wants the default pacing).
func (p *gcPacer) started(mostMB int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	if p.off || mostMB <= 0 {
		return
	}
	p.paced++
	p.most = max(p.most, int64(mostMB)<<20)
	p.apply()
}

// ended tells of a run that started with mostMB that is no longer in flight.
func (p *gcPacer) ended(mostMB int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs--
	if p.off || mostMB <= 0 {
		return
	}
	p.paced--
	if p.paced <= 0 {
		p.paced, p.most, p.tight, p.declined = 0, 0, false, 0
	}
	p.apply()
}

// inFlight returns how many runs are in flight, paced or not.
func (p *gcPacer) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}

// collected is called after a collection while runs are in flight: it checks the room the
// limit leaves with what the collection found live.
func (p *gcPacer) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = false
	p.declined = 0
	if p.limit > 0 && !p.roomy(p.limit, p.rt.sample()) {
		p.tight = true
	}
	p.apply()
}

// roomy reports whether limit leaves more room to allocate than the default pacing.
func (p *gcPacer) roomy(limit int64, s gcSample) bool { return s.room(limit) > s.defaultRoom() }

// apply puts the pacing the runs in flight call for in force. p.mu is held.
func (p *gcPacer) apply() {
	want := int64(0)
	if p.paced > 0 && !p.tight {
		want = min(p.most, int64(p.paced)*gcMemoryPerRun/gcMemoryStep*gcMemoryStep)
		switch {
		case want == p.limit:
		case want == p.declined:
			want = 0
		case !p.roomy(want, p.rt.sample()):
			// Not asked again until a collection has changed what is live.
			p.declined, want = want, 0
		}
	}
	switch {
	case want == p.limit:
	case p.limit == 0:
		p.percent = p.rt.setGCPercent(-1)
		p.memLimit = p.rt.setMemoryLimit(want)
	case want == 0:
		p.rt.setMemoryLimit(p.memLimit)
		p.rt.setGCPercent(p.percent)
	default:
		p.rt.setMemoryLimit(want)
	}
	p.limit = want
	if p.paced > 0 && !p.tight && !p.watching {
		p.watching = true
		p.rt.afterGC(p.collected)
	}
}

// realGC is the runtime itself.
type realGC struct{}

func (realGC) setGCPercent(v int) int       { return debug.SetGCPercent(v) }
func (realGC) setMemoryLimit(l int64) int64 { return debug.SetMemoryLimit(l) }

// sample reads the runtime's memory statistics. It stops the world for a moment, which
// it does when the runs in flight change the limit and after a collection while the
// pacing is in force, not at every step; runtime/metrics would not, but its package init
// costs every start of the binary more than these reads cost a burst of runs.
func (realGC) sample() gcSample {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	// HeapAlloc is what was live after the last collection and what was allocated since:
	// read just after a collection, about the live heap, and never less.
	return gcSample{live: m.HeapAlloc, scanned: m.StackInuse, other: m.Sys - min(m.HeapSys, m.Sys)}
}

// afterGC arms a cleanup on an object nothing refers to, which the runtime runs once a
// collection has found it unreachable. The object is too big for the tiny allocator,
// whose blocks are shared and may never be freed.
func (realGC) afterGC(f func()) {
	runtime.AddCleanup(new([32]byte), func(f func()) { f() }, f)
}
