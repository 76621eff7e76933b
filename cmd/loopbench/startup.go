package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startup measures the real loopbot binary: the time from exec to the first 200 from
// /healthz on its admin address, over several starts, and the RSS of the last one after it
// sat idle with its store and web console open. No model is configured, so the daemon runs
// in demo mode and makes no call to anything outside the machine.
func startup(ctx context.Context, o options) ([]figure, error) {
	bin := o.loopbot
	if bin == "" {
		dir, err := os.MkdirTemp("", "loopbench-bin-")
		if err != nil {
			return nil, fmt.Errorf("temp dir: %w", err)
		}
		defer os.RemoveAll(dir)
		if bin, err = buildLoopbot(ctx, dir); err != nil {
			return nil, err
		}
	}

	var took []time.Duration
	var idle idleMemory
	for i := range o.startupRuns {
		last := i == o.startupRuns-1
		d, mem, err := startOnce(ctx, bin, last, o.idle)
		if err != nil {
			return nil, fmt.Errorf("start %d: %w", i+1, err)
		}
		took = append(took, d)
		if last {
			idle = mem
		}
	}
	spread := fmt.Sprintf("%s to %s", slices.Min(took).Round(10*time.Microsecond), slices.Max(took).Round(10*time.Microsecond))
	med := median(took)
	figs := []figure{
		{Key: "startup_ms", Value: float64(med.Microseconds()) / 1e3, Unit: "ms",
			Note: fmt.Sprintf("median of %d starts (%s) of the real binary, each on a new database, demo mode, web console on: exec to the first 200 from /healthz, polled every millisecond", o.startupRuns, spread)},
		{Key: "idle_rss_mb", Value: float64(idle.rssKB) / 1024, Unit: "MB",
			Note: fmt.Sprintf("VmRSS of the last start after %s idle, store and web console open", o.idle)},
		{Key: "idle_anon_mb", Value: float64(idle.anonKB) / 1024, Unit: "MB",
			Note: "of it, RssAnon: the process's own memory (heap, stacks, runtime)"},
		{Key: "idle_file_mb", Value: float64(idle.fileKB) / 1024, Unit: "MB",
			Note: "of it, RssFile: pages of the binary (and the database file) mapped in; clean, shared with other processes of the same binary, and given back under memory pressure"},
		{Key: "idle_heap_inuse_mb", Value: idle.heapInuse / (1 << 20), Unit: "MB",
			Note: "go_memstats_heap_inuse_bytes from the daemon's own /metrics: the runtime's view of its heap"},
	}
	for _, part := range residentParts {
		figs = append(figs, figure{Key: "idle_" + part + "_mb", Value: float64(idle.parts[part]) / 1024, Unit: "MB",
			Note: partNotes[part]})
	}
	figs = append(figs, figure{Key: "binary_mb", Value: float64(idle.binBytes) / (1 << 20), Unit: "MB",
		Note: "size of the loopbot binary measured"})
	return figs, nil
}

// partNotes say what each part of the resident set holds, for the table.
var partNotes = map[string]string{
	partText:    "of idle_rss_mb, by page (/proc/PID/pagemap): the binary's code (.text)",
	partRodata:  "the binary's read-only data (.rodata, .typelink, .itablink)",
	partPclntab: "the binary's function table (.gopclntab), read to unwind and scan stacks",
	partData:    "the binary's writable data (.data, .noptrdata, .bss, .noptrbss)",
	partLibs:    "other mapped files: the C library and its loader in a cgo build, the database file",
	partAnon:    "anonymous memory outside the binary: the Go heap, goroutine stacks, the runtime's own",
}

// idleMemory is what an idle daemon holds: its resident set, split as the kernel counts it,
// and the heap as the Go runtime counts it.
type idleMemory struct {
	rssKB, anonKB, fileKB int64
	heapInuse             float64          // bytes
	parts                 map[string]int64 // KB, by residentParts
	binBytes              int64
}

// readIdleMemory reads pid's resident set from /proc and its heap from the admin /metrics.
func readIdleMemory(ctx context.Context, pid int, bin, metricsURL string) (idleMemory, error) {
	var m idleMemory
	parts, err := residentKB(pid, bin)
	if err != nil {
		return m, err
	}
	m.parts = parts
	st, err := os.Stat(bin)
	if err != nil {
		return m, err
	}
	m.binBytes = st.Size()
	status := fmt.Sprintf("/proc/%d/status", pid)
	for _, f := range []struct {
		name string
		to   *int64
	}{{"VmRSS", &m.rssKB}, {"RssAnon", &m.anonKB}, {"RssFile", &m.fileKB}} {
		v, err := procStatusKB(status, f.name)
		if err != nil {
			return m, err
		}
		*f.to = v
	}
	body, err := getBody(ctx, metricsURL)
	if err != nil {
		return m, fmt.Errorf("read metrics: %w", err)
	}
	v, ok := promValue(body, "go_memstats_heap_inuse_bytes")
	if !ok {
		return m, errors.New("read metrics: no go_memstats_heap_inuse_bytes")
	}
	m.heapInuse = v
	return m, nil
}

// promValue finds an unlabelled sample in Prometheus's text format.
func promValue(text, name string) (float64, bool) {
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// buildLoopbot builds ./cmd/loopbot of the module this command belongs to into dir, as the
// README's install command does: without cgo, so that the binary maps no C library and its
// loader (1.3 MB of the idle resident set) and resolves names with Go's own resolver.
func buildLoopbot(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root (run loopbench inside the loopbot module, or give -loopbot): %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "loopbot")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/loopbot")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build loopbot: %w\n%s", err, out)
	}
	return bin, nil
}

// startOnce starts the daemon in a new directory, waits for /healthz, and stops it with
// SIGTERM, which must end it with status 0. With idle set it first leaves the daemon alone
// for that long and reads its RSS.
func startOnce(ctx context.Context, bin string, idle bool, idleFor time.Duration) (took time.Duration, mem idleMemory, err error) {
	dir, err := os.MkdirTemp("", "loopbench-startup-")
	if err != nil {
		return 0, mem, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	admin, err := freeLoopbackAddr()
	if err != nil {
		return 0, mem, err
	}
	web, err := freeLoopbackAddr()
	if err != nil {
		return 0, mem, err
	}
	config := filepath.Join(dir, "loopbot.toml")
	toml := fmt.Sprintf("[store]\npath = %q\n[admin]\naddr = %q\n[web]\naddr = %q\n[tools]\nworkspace = %q\n",
		filepath.Join(dir, "loopbot.db"), admin, web, filepath.Join(dir, "ws"))
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		return 0, mem, fmt.Errorf("write config: %w", err)
	}

	cmd := exec.Command(bin, "-config", config, "serve")
	cmd.Dir = dir
	// A bare environment, so that no model key or chat token of the caller's reaches it.
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, mem, fmt.Errorf("exec %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if err != nil {
			cmd.Process.Kill()
			<-exited
			err = fmt.Errorf("%w; its log:\n%s", err, logs.String())
		}
	}()

	took, err = waitHealthy(ctx, "http://"+admin+"/healthz", start, exited)
	if err != nil {
		return 0, mem, err
	}
	if idle {
		if err := get(ctx, "http://"+web+"/"); err != nil {
			return 0, mem, fmt.Errorf("web console: %w", err)
		}
		select {
		case <-time.After(idleFor):
		case err := <-exited:
			exited <- err
			return 0, mem, fmt.Errorf("loopbot exited while idle: %v", err)
		case <-ctx.Done():
			return 0, mem, context.Cause(ctx)
		}
		if mem, err = readIdleMemory(ctx, cmd.Process.Pid, bin, "http://"+admin+"/metrics"); err != nil {
			return 0, mem, err
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, mem, fmt.Errorf("send SIGTERM: %w", err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred cleanup, should a later check fail
		if err != nil {
			return 0, mem, fmt.Errorf("loopbot exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		return 0, mem, errors.New("loopbot still running 30s after SIGTERM")
	}
	return took, mem, nil
}

// waitHealthy polls url every millisecond until it answers 200 and returns the time since
// start. Polling is what a supervisor does; the millisecond bounds what it adds.
func waitHealthy(ctx context.Context, url string, start time.Time, exited chan error) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), nil
			}
		}
		select {
		case <-tick.C:
		case err := <-exited:
			exited <- err
			return 0, fmt.Errorf("loopbot exited before /healthz answered: %v", err)
		case <-deadline:
			return 0, errors.New("/healthz did not answer 200 within 30s")
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// getBody fetches url, wants a 200, and returns the body.
func getBody(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b), err
}

// get fetches url and wants a 200.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freeLoopbackAddr returns a loopback address nothing listens on.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// lockedBuffer collects a process's output, which its copying goroutines write while the
// caller may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
