package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// mountTiny mounts a tmpfs of the given size (such as "2m") on a new directory and unmounts
// it when the test ends, after the daemon was stopped. It needs root: without the right to
// mount it skips, except in CI, where the suite is meant to run whole.
func mountTiny(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		if (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) && os.Getenv("CI") == "" {
			t.Skipf("mount a tmpfs: %v (the disk-full tests need root)", err)
		}
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillFS writes a file in dir until the file system is full, and returns its path.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return path
		}
	}
}

// moveDB points the setup's config at another database file.
func moveDB(t *testing.T, s *faultSetup, path string) {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	old := fmt.Sprintf("path = %q\n", s.db)
	cfg := strings.Replace(string(b), old, fmt.Sprintf("path = %q\n", path), 1)
	if cfg == string(b) {
		t.Fatalf("no %q in the config:\n%s", old, b)
	}
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.db = path
}

// TestFaultDiskFull fills the file system of the database while a run works: the run's
// checkpoint fails, the log says why in plain words, /healthz says the database refuses
// writes, nothing panics, the console keeps answering (a new goal gets a clear error), no
// message is posted twice, and once the space is freed the held run resumes by itself and
// finishes, the file passes the check, and the run completed before the disk filled is intact.
func TestFaultDiskFull(t *testing.T) {
	bin := loopbotBinary(t)
	mnt := mountTiny(t, "4m")
	const small = "Small answer before the disk filled."
	big := strings.Repeat("A long answer that does not fit on a full disk. ", 12000)
	bigAsked, filled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "big") {
			once.Do(func() { close(bigAsked) })
			<-filled
			return llmtest.Text(big)
		}
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "room") {
			return llmtest.Text("Answer once there is room.")
		}
		return llmtest.Text(small)
	}))
	s := newFaultSetup(t, model, fastEdits)
	moveDB(t, &s, filepath.Join(mnt, "loopbot.db"))
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	goals := []string{"small goal", "big goal"}
	t1 := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goals[0]})["thread"].(string)
	c.waitFor(t1, regexp.MustCompile(regexp.QuoteMeta(small)))
	t2 := c.post("/api/threads", map[string]string{"id": uuid(2), "user": "ann", "text": goals[1]})["thread"].(string)
	select {
	case <-bigAsked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model was not asked about the big goal; logs:\n%s", logs)
	}
	from := len(logs.String())
	filler := fillFS(t, mnt)
	close(filled)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, ok := logs.waitFor(ctx, from, `msg="run could not be saved`); !ok {
		t.Fatalf("no failed save logged after the disk filled; logs:\n%s", logs)
	}
	if !strings.Contains(logs.String()[from:], "no space left on device") {
		t.Errorf("the log does not say the disk is full:\n%s", logs.String()[from:])
	}
	// The daemon keeps serving: health says the database refuses writes, the console
	// answers, and a new goal that cannot be stored is refused clearly.
	admin := "http://" + loggedAdminAddr(t, logs.String())
	if code, body := getStatus(t, admin+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Errorf("/healthz on a full disk = %d %q, want 503 saying the disk is full", code, body)
	}
	res := postConsole(c.url+"/api/threads", map[string]string{"id": uuid(3), "user": "ann", "text": "goal on a full disk"})
	switch {
	case res.err != nil:
		t.Fatalf("posting a goal on a full disk: %v", res.err)
	case res.status == http.StatusCreated:
		goals = append(goals, "goal on a full disk")
	case res.status != http.StatusInternalServerError || res.body["error"] != "loopbot could not take this; the server log says why":
		t.Errorf("posting a goal on a full disk: %d %v, want 500 with a short error", res.status, res.body)
	}
	cardsWhileFull := strings.Count(c.threadText(t2), `"kind":"status"`)

	// With room again, the daemon takes goals without a restart; the run that wakes the
	// dispatcher would post the big goal's card a second time if it had forgotten that it
	// posted it while the disk was full.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	goals = append(goals, "small goal once there is room")
	c.post("/api/threads/"+t1+"/messages", map[string]string{"id": uuid(4), "user": "ann", "text": goals[len(goals)-1]})
	c.waitFor(t1, regexp.MustCompile(`Answer once there is room\.`))
	if cards := strings.Count(c.threadText(t2), `"kind":"status"`); cards != 1 || cardsWhileFull != 1 {
		t.Errorf("the big goal's thread shows %d status cards while the disk was full and %d after, want one", cardsWhileFull, cards)
	}
	// The run that could not be saved was held, as last saved, and resumes by itself now
	// that the store takes writes again: no restart, no failure.
	c.waitFor(t2, regexp.MustCompile(`A long answer that does not fit`))
	if code, body := getStatus(t, admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with room again = %d %q, want 200", code, body)
	}
	shown := []string{c.threadText(t1), c.threadText(t2)}
	p.terminate(25 * time.Second)

	// The file is sound for the next process.
	p = startLoopbot(t, bin, s.config, s.env, logs)
	p.terminate(25 * time.Second)
	for _, leak := range []string{"panic", "goroutine "} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("the log shows %q:\n%s", leak, logs)
		}
	}

	runs := invariants{db: s.db, goals: goals, shown: shown, logs: logs.String(), settled: true}.check(t)
	for _, r := range runs {
		want := map[string]string{"big goal": big, "small goal once there is room": "Answer once there is room."}[r.State.Goal]
		if want == "" {
			want = small
		}
		if r.Status != agent.StatusCompleted || r.State.Answer != want {
			t.Errorf("run of %q is %s with a %d-byte answer, want completed with its own", r.State.Goal, r.Status, len(r.State.Answer))
		}
	}
}

// TestFaultDiskFullAtStart starts the daemon with its database on a file system that is
// already full: it exits non-zero at once and says why; once there is room it starts on the
// same path.
func TestFaultDiskFullAtStart(t *testing.T) {
	bin := loopbotBinary(t)
	mnt := mountTiny(t, "1m")
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Text("Started after all."))
	s := newFaultSetup(t, model, fastEdits)
	moveDB(t, &s, filepath.Join(mnt, "loopbot.db"))
	filler := fillFS(t, mnt)

	stderr := serveMustFail(t, bin, s, "loopbot on a full disk")
	if want := "loopbot: open store " + s.db; !strings.Contains(stderr, want) || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("stderr does not say %q and that the disk is full:\n%s", want, stderr)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	th := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "start after all"})["thread"].(string)
	c.waitFor(th, regexp.MustCompile(`Started after all\.`))
	shown := c.threadText(th)
	p.terminate(25 * time.Second)
	invariants{db: s.db, goals: []string{"start after all"}, shown: []string{shown}, logs: logs.String() + stderr, settled: true}.check(t)
}

// TestFaultSecondProcessLocked starts a second daemon on the database a first one holds:
// the second exits non-zero within its lock timeout, saying the file is locked, and the
// first keeps working.
func TestFaultSecondProcessLocked(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Text("The first process still works."))
	s := newFaultSetup(t, model, fastEdits)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	stderr := serveMustFail(t, bin, s, "a second loopbot on a locked database")
	if want := "loopbot: database is locked by another loopbot process: " + s.db; !strings.Contains(stderr, want) {
		t.Errorf("stderr of the second process does not say %q:\n%s", want, stderr)
	}

	th := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "still there?"})["thread"].(string)
	c.waitFor(th, regexp.MustCompile(`The first process still works\.`))
	shown := c.threadText(th)
	p.terminate(25 * time.Second)
	invariants{db: s.db, goals: []string{"still there?"}, shown: []string{shown}, logs: logs.String() + stderr, settled: true}.check(t)
}

// getStatus GETs url and returns the status code and body, whatever the status.
func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serveMustFail runs the binary's serve command, which must exit non-zero within 30 s, and
// returns what it wrote to stderr.
func serveMustFail(t *testing.T, bin string, s faultSetup, what string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-config", s.config, "serve")
	cmd.Env = s.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 || ctx.Err() != nil {
		t.Fatalf("%s: %v, want a non-zero exit at once; stderr:\n%s", what, err, &stderr)
	}
	return stderr.String()
}
