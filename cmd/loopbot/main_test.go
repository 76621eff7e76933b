package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// daemon is a loopbot booted through Main on a temporary directory, in demo mode, with the
// console and the admin server on free loopback ports.
type daemon struct {
	t    *testing.T
	m    *Main
	dir  string
	logs *bytes.Buffer
}

func startDaemon(t *testing.T, dir string) *daemon {
	t.Helper()
	return startDaemonOn(t, dir, "127.0.0.1:0")
}

// startDaemonOn is startDaemon with the console on a given address, so a restarted daemon
// can serve the pages a browser still has open.
func startDaemonOn(t *testing.T, dir, webAddr string) *daemon {
	t.Helper()
	return startDaemonWith(t, dir, webAddr, func(string) string { return "" })
}

// startDaemonWith is startDaemonOn with the environment getenv gives, extra flags
// following the usual ones.
func startDaemonWith(t *testing.T, dir, webAddr string, getenv func(string) string, flags ...string) *daemon {
	t.Helper()
	logs := &bytes.Buffer{}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, logs
	m.Getenv = getenv
	args := append([]string{"-db", filepath.Join(dir, "loopbot.db"), "-web", webAddr, "-admin", "127.0.0.1:0"}, flags...)
	if err := m.ParseFlags(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	m.Config.Tools.Workspace = filepath.Join(dir, "ws")
	m.Config.Tools.Shell.Enabled = false
	m.Config.demoPace = 0
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("run: %v\n%s", err, logs)
	}
	d := &daemon{t: t, m: m, dir: dir, logs: logs}
	t.Cleanup(func() { d.close() })
	return d
}

func (d *daemon) close() {
	if d.m == nil {
		return
	}
	if err := d.m.Close(); err != nil {
		d.t.Errorf("close: %v", err)
	}
	d.m = nil
}

func (d *daemon) console() string { return "http://" + d.m.srv.webAddr }

// client drives the daemon's console as a browser page would.
func (d *daemon) client() consoleClient { return consoleClient{t: d.t, url: d.console(), logs: d.logs} }

var approveButton = regexp.MustCompile(`data-action="([^"]+)"[^>]*>Approve`)

func uuid(n int) string { return fmt.Sprintf("req-%08d-%d", n, time.Now().UnixNano()) }

// TestDemoEndToEnd boots the daemon with no credentials at all, starts a goal through the
// console's API, approves the demo's write_file across a restart of the daemon, and checks
// the answer, the tool's effect and the database.
func TestDemoEndToEnd(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir)
	res := d.client().post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "write a report on the workspace"})
	thread := res["thread"].(string)
	m := d.client().waitFor(thread, approveButton)
	approveID := m[1]

	// Restart while the approval is pending. The new process shows the pending card again.
	d.close()
	d = startDaemon(t, dir)
	if m := d.client().waitFor(thread, approveButton); m[1] != approveID {
		t.Fatalf("after the restart the card's button is %q, want %q", m[1], approveID)
	}
	res = d.client().post("/api/actions", map[string]string{"id": uuid(2), "user": "ann", "action": approveID, "thread": thread})
	if n, _ := res["notice"].(string); n != "" {
		t.Fatalf("approving after the restart was refused: %q", n)
	}
	// A second click changes nothing and says why.
	res = d.client().post("/api/actions", map[string]string{"id": uuid(3), "user": "ann", "action": approveID, "thread": thread})
	if n, _ := res["notice"].(string); !strings.Contains(n, "Already approved") {
		t.Errorf("second click notice = %q", n)
	}
	d.client().waitFor(thread, regexp.MustCompile(`wrote <strong>report\.md</strong>`))
	// The answer can be rated; the rating is counted in /metrics.
	up := d.client().waitFor(thread, regexp.MustCompile(`data-action="([^"]+)"[^>]*>👍`))[1]
	res = d.client().post("/api/actions", map[string]string{"id": uuid(4), "user": "ann", "action": up, "thread": thread})
	if n, _ := res["notice"].(string); n != "Thanks: you rated this answer helpful." {
		t.Errorf("rating notice = %q", n)
	}
	admin := "http://" + d.m.srv.adminAddr
	if body := get(t, admin+"/healthz"); strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %q", body)
	}
	metrics := get(t, admin+"/metrics")
	for _, want := range []string{`loopbot_runs{state="completed"} 1`, `loopbot_tool_calls_total{outcome="ok",tool="write_file"} 1`,
		`loopbot_chat_api_calls_total{method="update",outcome="ok",platform="web"}`, `loopbot_model_calls_total{outcome="ok",role="executor"}`,
		`loopbot_approval_wait_seconds_count{outcome="approved"} 1`, "loopbot_tool_calls_abandoned_running 0",
		`loopbot_answer_feedback{platform="web",value="up"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	d.close()

	db, err := store.Open(filepath.Join(dir, "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkDemoRun(t, db)
	if err := db.Check(context.Background()); err != nil {
		t.Errorf("database check: %v", err)
	}
}

// checkDemoRun checks what the demo story leaves in the store: one run, completed, whose
// write_file ran exactly once.
func checkDemoRun(t *testing.T, s bot.Store) {
	t.Helper()
	var runs []*bot.RunRecord
	if err := s.View(context.Background(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v", runs)
	}
	writes := 0
	// The demo is a planned run: write_file is a call of the second step's executor.
	for _, c := range runs[0].State.AllCalls() {
		if c.Name == "write_file" && c.Attempts > 0 {
			writes += c.Attempts
		}
	}
	if writes != 1 {
		t.Errorf("write_file ran %d times, want exactly once", writes)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	code, body := getStatus(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, body)
	}
	return body
}

// TestSecondProcessGetsLockError starts a daemon and then a second one on the same database:
// the second fails at once with the lock error instead of hanging.
func TestSecondProcessGetsLockError(t *testing.T) {
	dir := t.TempDir()
	startDaemon(t, dir)
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	m.Getenv = func(string) string { return "" }
	if err := m.ParseFlags(context.Background(), []string{"-db", filepath.Join(dir, "loopbot.db"), "-web", "127.0.0.1:0", "-admin", "127.0.0.1:0", "serve"}); err != nil {
		t.Fatal(err)
	}
	m.Config.Store.LockTimeout = agent.Duration(50 * time.Millisecond)
	err := m.Run(context.Background())
	defer m.Close()
	if err == nil || !strings.Contains(err.Error(), "database is locked by another loopbot process: "+filepath.Join(dir, "loopbot.db")) {
		t.Errorf("err = %v, want the lock error naming the file", err)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{{"serve", "extra"}, {"dance"}, {"runs", "show"}, {"check", "-bogus"}, {"-config", "/nonexistent/loopbot.toml"}} {
		m := NewMain()
		m.Stderr = io.Discard
		m.Getenv = func(string) string { return "" }
		if err := m.ParseFlags(context.Background(), args); err == nil {
			t.Errorf("ParseFlags(%q) accepted", args)
		}
	}
}
