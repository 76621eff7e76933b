package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// startPostgresDaemon boots the demo daemon as startDaemon does, on the PostgreSQL database
// at url, given as LOOPBOT_DATABASE_URL with [store] backend = "postgres" in the file.
func startPostgresDaemon(t *testing.T, dir, url string) *daemon {
	t.Helper()
	cfgPath := filepath.Join(dir, "loopbot.toml")
	if err := os.WriteFile(cfgPath, []byte("[store]\nbackend = \"postgres\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemonWith(t, dir, "127.0.0.1:0", func(k string) string {
		if k == "LOOPBOT_DATABASE_URL" {
			return url
		}
		return ""
	}, "-config", cfgPath)
}

// TestDemoOnPostgres is TestDemoEndToEnd's story on the PostgreSQL backend: a goal through
// the console, the demo's approval pending across a restart, approved, the run completed
// with its tool run once, the database checked. The password of the URL appears in no log
// line.
func TestDemoOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	// The test cluster trusts loopback connections, so any password connects: it is here
	// to be looked for in the logs.
	const pw = "pg-canary-0123456789"
	url = strings.Replace(url, "postgres@", "postgres:"+pw+"@", 1)
	dir := t.TempDir()
	d := startPostgresDaemon(t, dir, url)
	res := d.client().post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "write a report on the workspace"})
	thread := res["thread"].(string)
	approveID := d.client().waitFor(thread, approveButton)[1]
	d.close()
	logs := d.logs.String()

	d = startPostgresDaemon(t, dir, url)
	if m := d.client().waitFor(thread, approveButton); m[1] != approveID {
		t.Fatalf("after the restart the card's button is %q, want %q", m[1], approveID)
	}
	res = d.client().post("/api/actions", map[string]string{"id": uuid(2), "user": "ann", "action": approveID, "thread": thread})
	if n, _ := res["notice"].(string); n != "" {
		t.Fatalf("approving after the restart was refused: %q", n)
	}
	d.client().waitFor(thread, regexp.MustCompile(`wrote <strong>report\.md</strong>`))
	if body := get(t, "http://"+d.m.srv.adminAddr+"/healthz"); strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %q", body)
	}
	cfg := d.m.Config
	d.close()
	logs += d.logs.String()
	if strings.Contains(logs, pw) {
		t.Errorf("the logs carry the database password:\n%s", logs)
	}
	if !strings.Contains(logs, "backend=postgres") {
		t.Errorf("the logs do not say the database's backend:\n%s", logs)
	}

	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkDemoRun(t, db)
	// `loopbot runs` reads the database while replicas could be running, and lists the run.
	var out bytes.Buffer
	m := &Main{Config: cfg, Stdout: &out, Stderr: io.Discard, Logger: slog.New(slog.DiscardHandler)}
	if err := m.runs(t.Context()); err != nil || !strings.Contains(out.String(), "completed") {
		t.Errorf("loopbot runs = %v:\n%s", err, out.String())
	}
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("database check: %v", err)
	}
}
