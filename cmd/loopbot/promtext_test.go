package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRegistryText checks the exposition against what Prometheus's client library wrote for
// the same metrics: families sorted by name, labels by name and members by label values,
// cumulative buckets with le last, escaped label values and help, and no family without
// members.
func TestRegistryText(t *testing.T) {
	r := newRegistry()
	calls := newCounterVec(opts{name: "x_calls_total", help: "Calls by tool\\outcome.\nSecond line.", labels: []string{"tool", "outcome"}})
	secs := newHistogramVec(opts{name: "x_seconds", help: "Durations.", labels: []string{"tool"}}, exponentialBuckets(1, 4, 3))
	empty := newCounterVec(opts{name: "x_empty_total", help: "Never counted.", labels: []string{"a"}})
	r.register(calls, secs, empty,
		&gaugeFunc{opts: opts{name: "a_gauge", help: "A value."}, collect: single(func() float64 { return 2818048 })})
	calls.WithLabelValues("write_file", "ok").Inc()
	calls.WithLabelValues("write_file", "ok").Add(2)
	calls.WithLabelValues("http_fetch", "error").Inc()
	calls.WithLabelValues(`say "hi"`, "ok").Add(0.5)
	for _, v := range []float64{0.5, 1, 3, 100} {
		secs.WithLabelValues("shell").Observe(v)
	}
	got, err := r.write()
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_gauge A value.
# TYPE a_gauge gauge
a_gauge 2.818048e+06
# HELP x_calls_total Calls by tool\\outcome.\nSecond line.
# TYPE x_calls_total counter
x_calls_total{outcome="error",tool="http_fetch"} 1
x_calls_total{outcome="ok",tool="say \"hi\""} 0.5
x_calls_total{outcome="ok",tool="write_file"} 3
# HELP x_seconds Durations.
# TYPE x_seconds histogram
x_seconds_bucket{tool="shell",le="1"} 2
x_seconds_bucket{tool="shell",le="4"} 3
x_seconds_bucket{tool="shell",le="16"} 3
x_seconds_bucket{tool="shell",le="+Inf"} 4
x_seconds_sum{tool="shell"} 104.5
x_seconds_count{tool="shell"} 4
`
	if string(got) != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// TestRegistryFailedFamilyFailsTheScrape: a figure that cannot be read (the store is gone)
// answers 500, as Prometheus's handler does, rather than a page that silently lacks it.
func TestRegistryFailedFamilyFailsTheScrape(t *testing.T) {
	r := newRegistry()
	r.register(&gaugeFunc{opts: opts{name: "runs", help: "Runs.", labels: []string{"state"}},
		collect: func() ([]gaugeSample, error) { return nil, errors.New("database closed") }})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "database closed") {
		t.Errorf("status %d, body %q; want 500 naming the error", rec.Code, rec.Body.String())
	}

	ok := newRegistry()
	ok.register(runtimeFamilies()...)
	rec = httptest.NewRecorder()
	ok.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("status %d, content type %q", rec.Code, ct)
	}
}

func TestRegistryRefusesANameTwice(t *testing.T) {
	r := newRegistry()
	r.register(newCounterVec(opts{name: "x_total", help: "x"}))
	defer func() {
		if recover() == nil {
			t.Error("a second x_total was registered")
		}
	}()
	r.register(newCounterVec(opts{name: "x_total", help: "x again"}))
}

// TestRuntimeAndProcessFamilies: the daemon's /metrics carries the Go runtime's and the
// process's figures under the names Prometheus's collectors gave them; loopbench reads
// go_memstats_heap_inuse_bytes.
func TestRuntimeAndProcessFamilies(t *testing.T) {
	r := newRegistry()
	r.register(runtimeFamilies()...)
	r.register(processFamilies(time.Now())...)
	b, err := r.write()
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, name := range []string{"go_goroutines", "go_threads", "go_info", "go_gc_duration_seconds_count", "go_gc_gogc_percent",
		"go_gc_gomemlimit_bytes", "go_sched_gomaxprocs_threads", "go_memstats_heap_inuse_bytes", "go_memstats_alloc_bytes_total",
		"go_memstats_sys_bytes", "go_memstats_next_gc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes",
		"process_virtual_memory_bytes", "process_start_time_seconds", "process_open_fds", "process_max_fds"} {
		if !strings.Contains(text, "\n"+name+" ") && !strings.Contains(text, "\n"+name+"{") {
			t.Errorf("no %s in:\n%s", name, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "process_resident_memory_bytes ") && strings.HasSuffix(line, " 0") {
			t.Errorf("%s: the process has a resident set", line)
		}
	}
}

func TestGOGCPercent(t *testing.T) {
	for env, want := range map[string]int{"": 100, "off": -1, "50": 50, "400": 400, "junk": 100} {
		if got := gogcPercent(env); got != want {
			t.Errorf("gogcPercent(%q) = %d, want %d", env, got, want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (loop bot) (x)) S 1 4242 4242 0 -1 4194560 2222 0 0 0 150 37 0 0 20 0 9 0 12345 1772019712 6248 18446744073709551615"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{utime: 150, stime: 37, vsize: 1772019712, rss: 6248}); st != want {
		t.Errorf("parseProcStat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}
