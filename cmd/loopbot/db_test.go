package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/store"
)

// command runs one loopbot command in this process on the database in dir, as the binary
// would, and returns what it printed.
func command(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	m := NewMain()
	out := &bytes.Buffer{}
	m.Stdout, m.Stderr = out, io.Discard
	m.Getenv = func(string) string { return "" }
	if err := m.ParseFlags(context.Background(), append([]string{"-db", filepath.Join(dir, "loopbot.db")}, args...)); err != nil {
		t.Fatal(err)
	}
	m.Config.Store.LockTimeout = agent.Duration(100 * time.Millisecond)
	err := m.Run(context.Background())
	return out.String(), err
}

// pendingRun starts the demo's run, which waits for an approval, and returns its thread.
func pendingRun(d *daemon) string {
	d.t.Helper()
	res := d.client().post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "write a report on the workspace"})
	thread := res["thread"].(string)
	d.client().waitFor(thread, approveButton)
	return thread
}

// TestRunsWhileServing runs `loopbot runs` and `runs show` while the daemon holds the
// database: they ask the daemon, with the token of the admin file, and print what they print
// once it has stopped.
func TestRunsWhileServing(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir)
	pendingRun(d)

	list, err := command(t, dir, "runs")
	if err != nil {
		t.Fatalf("runs while serving: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "awaiting_approval") || !strings.Contains(lines[1], "write a report on the workspace") {
		t.Fatalf("runs while serving printed:\n%s", list)
	}
	id := strings.Fields(lines[1])[0]
	show, err := command(t, dir, "runs", "show", id)
	if err != nil || !strings.Contains(show, "Run "+id) || !strings.Contains(show, "write_file(") {
		t.Fatalf("runs show while serving: %v\n%s", err, show)
	}
	if _, err := command(t, dir, "runs", "show", "run-nope"); err == nil || !strings.Contains(err.Error(), `no run "run-nope"`) {
		t.Errorf("runs show of an unknown run while serving: %v", err)
	}

	// The runs are for whoever can read the database, which the admin file's mode says.
	path := adminFilePath(filepath.Join(dir, "loopbot.db"))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("admin file mode %v, want 0600", info.Mode().Perm())
	}
	var f adminFile
	if data, err := os.ReadFile(path); err != nil || json.Unmarshal(data, &f) != nil {
		t.Fatalf("admin file: %v", err)
	}
	for _, auth := range []string{"", "Bearer ", "Bearer " + f.Token[:len(f.Token)-1], f.Token} {
		for _, p := range []string{"/runs", "/runs/" + id} {
			req, _ := http.NewRequest("GET", "http://"+d.m.srv.adminAddr+p, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "workspace") {
				t.Errorf("GET %s with Authorization %q: %s: %s", p, auth, resp.Status, body)
			}
		}
	}

	d.close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the admin file outlived the daemon: %v", err)
	}
	offline, err := command(t, dir, "runs")
	if err != nil || offline != list {
		t.Errorf("runs offline: %v\n%s\nwant what it printed while serving:\n%s", err, offline, list)
	}
	if offline, err := command(t, dir, "runs", "show", id); err != nil || offline != show {
		t.Errorf("runs show offline: %v\n%s\nwant what it printed while serving:\n%s", err, offline, show)
	}
}

// TestRunsWhileServingWithoutAdmin: with the admin endpoint off there is nobody to ask, and
// runs says so.
func TestRunsWhileServingWithoutAdmin(t *testing.T) {
	dir := t.TempDir()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	m.Getenv = func(string) string { return "" }
	if err := m.ParseFlags(context.Background(), []string{"-db", filepath.Join(dir, "loopbot.db"), "-web", "127.0.0.1:0", "-admin", "off"}); err != nil {
		t.Fatal(err)
	}
	m.Config.Tools.Workspace = filepath.Join(dir, "ws")
	m.Config.Tools.Shell.Enabled = false
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err := command(t, dir, "runs")
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "[admin] addr is off") {
		t.Errorf("runs: %v, want the lock error saying there is no admin endpoint", err)
	}
}

// TestDBCheckAndCompact checks and compacts a database the demo wrote: both refuse while
// the daemon runs; compact keeps the original and changes no run; check fails on a file cut
// short.
func TestDBCheckAndCompact(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "loopbot.db")
	d := startDaemon(t, dir)
	pendingRun(d)
	for _, sub := range []string{"check", "compact"} {
		if _, err := command(t, dir, "db", sub); !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "stop it first") {
			t.Errorf("db %s while serving: %v, want the lock error", sub, err)
		}
	}
	d.close()
	runs, err := command(t, dir, "runs")
	if err != nil {
		t.Fatal(err)
	}

	out, err := command(t, dir, "db", "check")
	if err != nil || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("db check: %v\n%s", err, out)
	}
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	out, err = command(t, dir, "db", "compact")
	if err != nil || !strings.Contains(out, "compacted "+db) {
		t.Fatalf("db compact: %v\n%s", err, out)
	}
	if kept, err := os.ReadFile(db + ".bak"); err != nil || !bytes.Equal(kept, before) {
		t.Errorf("the original was not kept as it was at %s.bak: %v", db, err)
	}
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > len(before) {
		t.Errorf("compacted file is %d bytes, the original %d", len(after), len(before))
	}
	if out, err := command(t, dir, "db", "check"); err != nil {
		t.Errorf("db check of the compacted file: %v\n%s", err, out)
	}
	if got, err := command(t, dir, "runs"); err != nil || got != runs {
		t.Errorf("runs after compact: %v\n%s\nwant\n%s", err, got, runs)
	}
	if _, err := command(t, dir, "db", "compact"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second compact: %v, want a refusal to overwrite the backup", err)
	}
	if kept, err := os.ReadFile(db + ".bak"); err != nil || !bytes.Equal(kept, before) {
		t.Errorf("the second compact changed the backup: %v", err)
	}

	if err := os.WriteFile(db, after[:(highWater(after)-1)*4096], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = command(t, dir, "db", "check")
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("db check of a file cut short: %v\n%s", err, out)
	}
}

// highWater is the number of pages the metadata of a bbolt file counts, read from the
// newer of its two meta pages (their transaction IDs are 64 bytes in, the counts 56).
func highWater(data []byte) int {
	meta := 0
	if binary.LittleEndian.Uint64(data[4096+64:]) > binary.LittleEndian.Uint64(data[64:]) {
		meta = 4096
	}
	return int(binary.LittleEndian.Uint64(data[meta+56:]))
}
