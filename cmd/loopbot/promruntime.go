package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runtimeFamilies are the Go runtime's figures under the names Prometheus's Go collector
// gives them, so that dashboards made for any Go service read them: goroutines, threads,
// the GC's pauses and settings, and the memory statistics.
func runtimeFamilies() []family {
	// One scrape reads the memory statistics once, for all the go_memstats families.
	var (
		mu   sync.Mutex
		ms   runtime.MemStats
		read time.Time
	)
	mem := func(f func(*runtime.MemStats) float64) func() ([]gaugeSample, error) {
		return func() ([]gaugeSample, error) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(read) > time.Second {
				runtime.ReadMemStats(&ms)
				read = time.Now()
			}
			return []gaugeSample{{value: f(&ms)}}, nil
		}
	}
	memstat := func(name, typ, help string, f func(*runtime.MemStats) float64) family {
		return &gaugeFunc{opts: opts{name: "go_memstats_" + name, help: help}, typ: typ, collect: mem(f)}
	}
	u := func(v uint64) float64 { return float64(v) }
	fs := []family{
		&gaugeFunc{opts: opts{name: "go_goroutines", help: "Number of goroutines that currently exist."},
			collect: single(func() float64 { return float64(runtime.NumGoroutine()) })},
		&gaugeFunc{opts: opts{name: "go_threads", help: "Number of OS threads created."},
			collect: single(func() float64 { n, _ := runtime.ThreadCreateProfile(nil); return float64(n) })},
		&gaugeFunc{opts: opts{name: "go_info", help: "Information about the Go environment.", labels: []string{"version"}},
			collect: func() ([]gaugeSample, error) {
				return []gaugeSample{{values: []string{runtime.Version()}, value: 1}}, nil
			}},
		&gaugeFunc{opts: opts{name: "go_sched_gomaxprocs_threads", help: "The current runtime.GOMAXPROCS setting."},
			collect: single(func() float64 { return float64(runtime.GOMAXPROCS(0)) })},
		&gaugeFunc{opts: opts{name: "go_gc_gogc_percent", help: "Heap size target percentage configured by the user (GOGC), otherwise 100; -1 when off."},
			collect: single(func() float64 { return float64(gogcPercent(os.Getenv("GOGC"))) })},
		&gaugeFunc{opts: opts{name: "go_gc_gomemlimit_bytes", help: "Go runtime memory limit configured by the user, otherwise math.MaxInt64 (GOMEMLIMIT, debug.SetMemoryLimit)."},
			collect: single(func() float64 { return float64(debug.SetMemoryLimit(-1)) })},
		gcPauses{},
		memstat("alloc_bytes", "", "Number of bytes allocated in heap and currently in use.", func(m *runtime.MemStats) float64 { return u(m.HeapAlloc) }),
		memstat("alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now, even if released already.", func(m *runtime.MemStats) float64 { return u(m.TotalAlloc) }),
		memstat("sys_bytes", "", "Number of bytes obtained from system.", func(m *runtime.MemStats) float64 { return u(m.Sys) }),
		memstat("mallocs_total", "counter", "Total number of heap objects allocated, both live and gc-ed.", func(m *runtime.MemStats) float64 { return u(m.Mallocs) }),
		memstat("frees_total", "counter", "Total number of heap objects frees.", func(m *runtime.MemStats) float64 { return u(m.Frees) }),
		memstat("heap_alloc_bytes", "", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes.", func(m *runtime.MemStats) float64 { return u(m.HeapAlloc) }),
		memstat("heap_sys_bytes", "", "Number of heap bytes obtained from system.", func(m *runtime.MemStats) float64 { return u(m.HeapSys) }),
		memstat("heap_idle_bytes", "", "Number of heap bytes waiting to be used.", func(m *runtime.MemStats) float64 { return u(m.HeapIdle) }),
		memstat("heap_inuse_bytes", "", "Number of heap bytes that are in use.", func(m *runtime.MemStats) float64 { return u(m.HeapInuse) }),
		memstat("heap_released_bytes", "", "Number of heap bytes released to OS.", func(m *runtime.MemStats) float64 { return u(m.HeapReleased) }),
		memstat("heap_objects", "", "Number of currently allocated objects.", func(m *runtime.MemStats) float64 { return u(m.HeapObjects) }),
		memstat("stack_inuse_bytes", "", "Number of bytes in use by the stack allocator.", func(m *runtime.MemStats) float64 { return u(m.StackInuse) }),
		memstat("stack_sys_bytes", "", "Number of bytes obtained from system for stack allocator.", func(m *runtime.MemStats) float64 { return u(m.StackSys) }),
		memstat("mspan_inuse_bytes", "", "Number of bytes in use by mspan structures.", func(m *runtime.MemStats) float64 { return u(m.MSpanInuse) }),
		memstat("mspan_sys_bytes", "", "Number of bytes used for mspan structures obtained from system.", func(m *runtime.MemStats) float64 { return u(m.MSpanSys) }),
		memstat("mcache_inuse_bytes", "", "Number of bytes in use by mcache structures.", func(m *runtime.MemStats) float64 { return u(m.MCacheInuse) }),
		memstat("mcache_sys_bytes", "", "Number of bytes used for mcache structures obtained from system.", func(m *runtime.MemStats) float64 { return u(m.MCacheSys) }),
		memstat("buck_hash_sys_bytes", "", "Number of bytes used by the profiling bucket hash table.", func(m *runtime.MemStats) float64 { return u(m.BuckHashSys) }),
		memstat("gc_sys_bytes", "", "Number of bytes used for garbage collection system metadata.", func(m *runtime.MemStats) float64 { return u(m.GCSys) }),
		memstat("other_sys_bytes", "", "Number of bytes used for other system allocations.", func(m *runtime.MemStats) float64 { return u(m.OtherSys) }),
		memstat("next_gc_bytes", "", "Number of heap bytes when next garbage collection will take place.", func(m *runtime.MemStats) float64 { return u(m.NextGC) }),
		memstat("last_gc_time_seconds", "", "Number of seconds since 1970 of last garbage collection.", func(m *runtime.MemStats) float64 { return float64(m.LastGC) / 1e9 }),
	}
	return fs
}

// gogcPercent reads GOGC as the runtime does at start; loopbot never changes it later.
// Reading it from runtime/metrics instead would link that package, whose init builds its
// descriptions at every start.
func gogcPercent(env string) int {
	if env == "off" {
		return -1
	}
	if n, err := strconv.Atoi(env); err == nil {
		return n
	}
	return 100
}

// gcPauses is go_gc_duration_seconds: a summary of the GC's stop-the-world pauses, with
// the quantiles Prometheus's Go collector gives (0, 0.25, 0.5, 0.75, 1).
type gcPauses struct{}

func (gcPauses) meta() (string, string, string) {
	return "go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", "summary"
}

func (gcPauses) samples(b []byte) ([]byte, error) {
	var st debug.GCStats
	st.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&st)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		b = appendSample(b, "go_gc_duration_seconds", []string{"quantile"}, []string{q}, "", "", st.PauseQuantiles[i].Seconds())
	}
	b = appendSample(b, "go_gc_duration_seconds_sum", nil, nil, "", "", st.PauseTotal.Seconds())
	return appendSample(b, "go_gc_duration_seconds_count", nil, nil, "", "", float64(st.NumGC)), nil
}

// processFamilies are the process's figures under the names of Prometheus's process
// collector, read from /proc at scrape time.
func processFamilies(started time.Time) []family {
	stat := func(f func(procStat) float64) func() ([]gaugeSample, error) {
		return func() ([]gaugeSample, error) {
			st, err := readProcStat()
			if err != nil {
				return nil, err
			}
			return []gaugeSample{{value: f(st)}}, nil
		}
	}
	page := float64(os.Getpagesize())
	return []family{
		&gaugeFunc{opts: opts{name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds."}, typ: "counter",
			collect: stat(func(s procStat) float64 { return float64(s.utime+s.stime) / clockTicks })},
		&gaugeFunc{opts: opts{name: "process_resident_memory_bytes", help: "Resident memory size in bytes."},
			collect: stat(func(s procStat) float64 { return float64(s.rss) * page })},
		&gaugeFunc{opts: opts{name: "process_virtual_memory_bytes", help: "Virtual memory size in bytes."},
			collect: stat(func(s procStat) float64 { return float64(s.vsize) })},
		&gaugeFunc{opts: opts{name: "process_start_time_seconds", help: "Start time of the process since unix epoch in seconds."},
			collect: single(func() float64 { return float64(started.UnixNano()) / 1e9 })},
		&gaugeFunc{opts: opts{name: "process_open_fds", help: "Number of open file descriptors."},
			collect: func() ([]gaugeSample, error) {
				fds, err := os.ReadDir("/proc/self/fd")
				if err != nil {
					return nil, err
				}
				return []gaugeSample{{value: float64(len(fds))}}, nil
			}},
		&gaugeFunc{opts: opts{name: "process_max_fds", help: "Maximum number of open file descriptors."},
			collect: rlimit(syscall.RLIMIT_NOFILE)},
		&gaugeFunc{opts: opts{name: "process_virtual_memory_max_bytes", help: "Maximum amount of virtual memory available in bytes."},
			collect: rlimit(syscall.RLIMIT_AS)},
	}
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux architecture Go
// supports.
const clockTicks = 100

// rlimit reads a soft resource limit; unlimited is reported as the largest uint64, as
// Prometheus's process collector does.
func rlimit(resource int) func() ([]gaugeSample, error) {
	return func() ([]gaugeSample, error) {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(resource, &l); err != nil {
			return nil, err
		}
		if l.Cur == math.MaxUint64 || int64(l.Cur) < 0 {
			return []gaugeSample{{value: math.MaxUint64}}, nil
		}
		return []gaugeSample{{value: float64(l.Cur)}}, nil
	}
}

// procStat is what the process collector reads of /proc/self/stat.
type procStat struct {
	utime, stime uint64 // clock ticks
	vsize        uint64 // bytes
	rss          uint64 // pages
}

// readProcStat parses /proc/self/stat. The command name, the second field, is in
// parentheses and may hold spaces, so the fields are counted after its closing one.
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse /proc/self/stat: no command name")
	}
	// After ")" come the fields from the third on: state is index 0, utime (14th field)
	// index 11, stime 12, vsize (23rd) 20, rss 21.
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("parse /proc/self/stat: %d fields", len(f)+2)
	}
	var st procStat
	for _, p := range []struct {
		idx int
		to  *uint64
	}{{11, &st.utime}, {12, &st.stime}, {20, &st.vsize}, {21, &st.rss}} {
		v, err := strconv.ParseUint(f[p.idx], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("parse /proc/self/stat: %w", err)
		}
		*p.to = v
	}
	return st, nil
}
