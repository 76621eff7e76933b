package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// The fault tests run the real binary against the scripted model and break it as the
// operating system would: SIGKILL with an approval pending, SIGTERM in the middle of a model
// call. Each one then restarts it on the same database and console address and checks that
// the run is neither lost nor repeated.

// canaryKey is the API key the daemon is given; it must never reach a chat message or a log.
const canaryKey = "sk-canary-7f3c9e1d2b4a6f8e0c5d"

// invariants is what every fault test asserts once the dust has settled, with the daemon
// stopped: see check.
type invariants struct {
	// db is the database file of the stopped daemon.
	db string
	// goals are the texts of the events the platform saw acknowledged (or the console
	// accepted); each must have started exactly one run.
	goals []string
	// shown is everything posted to chat: messages, cards, notices.
	shown []string
	// logs is the daemon's log.
	logs string
	// secrets must appear in neither shown nor logs; canaryKey always is one.
	secrets []string
	// settled, when set, requires every run to have ended (no run left running or queued).
	settled bool
	// runs, when set, are the runs to check instead of those of the file db (a PostgreSQL
	// database, which the caller read).
	runs []*bot.RunRecord
}

// nonIdempotent are the tools whose calls must never have run more than once.
var nonIdempotent = map[string]bool{"shell": true, "write_file": true}

// check opens the database and asserts the invariants of the fault suite: the file passes
// bbolt's check; every acknowledged goal has exactly one run (none lost, none doubled); every
// run is in a legal state, with calls that agree with it; no non-idempotent call ran twice;
// no secret was posted or logged. It returns the runs for the test's own assertions.
func (inv invariants) check(t *testing.T) []*bot.RunRecord {
	t.Helper()
	runs := inv.runs
	if runs == nil {
		runs = savedRuns(t, inv.db)
	}
	for _, g := range inv.goals {
		n := 0
		for _, r := range runs {
			if r.State != nil && r.State.Goal == g {
				n++
			}
		}
		if n != 1 {
			t.Errorf("goal %q has %d runs, want exactly 1", g, n)
		}
	}
	for _, r := range runs {
		if r.State == nil {
			t.Errorf("run %s has no state", r.ID)
			continue
		}
		if !r.Status.Valid() || r.Status != r.State.Status {
			t.Errorf("run %s: record status %q, state status %q: want one legal status", r.ID, r.Status, r.State.Status)
		}
		ended := r.Status.Terminal()
		if inv.settled && !ended {
			t.Errorf("run %s is still %s, want it ended", r.ID, r.Status)
		}
		for _, c := range r.State.AllCalls() {
			if nonIdempotent[c.Name] && c.Attempts > 1 {
				t.Errorf("run %s: %s call %s ran %d times", r.ID, c.Name, c.ID, c.Attempts)
			}
			if ended && (c.Status == agent.CallStarted || c.Status == agent.CallAwaitingApproval) {
				t.Errorf("run %s is %s but call %s (%s) is still %s", r.ID, r.Status, c.ID, c.Name, c.Status)
			}
		}
		if r.Status == agent.StatusAwaitingApproval && r.State.Pause == nil {
			t.Errorf("run %s awaits approval with no pause recorded", r.ID)
		}
	}
	shown := strings.Join(inv.shown, "\n")
	for _, s := range append([]string{canaryKey}, inv.secrets...) {
		if strings.Contains(shown, s) {
			t.Errorf("secret %q was posted to chat", s)
		}
		if strings.Contains(inv.logs, s) {
			t.Errorf("secret %q is in the daemon's log", s)
		}
	}
	return runs
}

// faultSetup is a temporary directory with a config file for the binary and the environment
// that points it at a scripted model.
type faultSetup struct {
	dir, db, config, web string
	env                  []string
}

func newFaultSetup(t *testing.T, model *llmtest.Server, extra string) faultSetup {
	t.Helper()
	dir := t.TempDir()
	s := faultSetup{dir: dir, db: filepath.Join(dir, "loopbot.db"), web: freeAddr(t)}
	s.config = filepath.Join(dir, "loopbot.toml")
	cfg := fmt.Sprintf(`[store]
path = %q
[admin]
addr = %q
[web]
addr = %q
threads = "all"
[tools]
workspace = %q
[tools.shell]
enabled = false
%s`, s.db, freeAddr(t), s.web, filepath.Join(dir, "ws"), extra)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"HOME=" + dir, "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=" + canaryKey, "LOOPBOT_WEB_USERS=" + consoleUsersEnv()}
	return s
}

// TestFaultKill9WhileApprovalPending kills the daemon with SIGKILL while write_file waits for
// approval, restarts it, approves on the restarted console, and checks that the run completed
// once, the file was written once, and the API key leaked nowhere.
func TestFaultKill9WhileApprovalPending(t *testing.T) {
	bin := loopbotBinary(t)
	const content = "written once by the fault test\n"
	// The model writes a file, then answers with the Authorization header it received, as
	// a model that echoes its prompt might: the bot must redact it.
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if r.LastMessage().Role == "tool" {
			return llmtest.Text("Done. The file is written; my header was " + r.Header.Get("Authorization"))
		}
		return llmtest.ToolCalls(llmtest.Call("write_file", fmt.Sprintf(`{"path":"out.txt","content":%q}`, content)))
	}))
	s := newFaultSetup(t, model, "[agent.risk]\nwrite_file = \"confirm\"\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}

	start := time.Now()
	p := startLoopbot(t, bin, s.config, s.env, logs)
	res := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "write out.txt"})
	thread := res["thread"].(string)
	approveID := c.waitFor(thread, approveButton)[1]
	p.kill()

	p = startLoopbot(t, bin, s.config, s.env, logs)
	if got := c.waitFor(thread, approveButton)[1]; got != approveID {
		t.Fatalf("after the restart the card's button is %q, want %q", got, approveID)
	}
	res = c.post("/api/actions", map[string]string{"id": uuid(2), "user": "ann", "action": approveID, "thread": thread})
	if n, _ := res["notice"].(string); n != "" {
		t.Fatalf("approving after the restart was refused: %q", n)
	}
	c.waitFor(thread, regexp.MustCompile(`Done\. The file is written`))
	shown := c.threadText(thread)
	stopped := p.terminate(25 * time.Second)
	t.Logf("whole test %s, SIGTERM to exit %s", time.Since(start).Round(time.Millisecond), stopped.Round(time.Millisecond))

	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2 (the tool call, then the answer)", n)
	}

	runs := invariants{db: s.db, goals: []string{"write out.txt"}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs saved, want 1: %+v", len(runs), runs)
	}
	if runs[0].Status != agent.StatusCompleted {
		t.Errorf("run is %s, want %s", runs[0].Status, agent.StatusCompleted)
	}
	writes := 0
	for _, call := range runs[0].State.Calls {
		if call.Name == "write_file" {
			writes += call.Attempts
		}
	}
	if writes != 1 {
		t.Errorf("write_file ran %d times, want exactly once", writes)
	}
	var found []string
	err := filepath.WalkDir(filepath.Join(s.dir, "ws"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "out.txt" {
			found = append(found, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("out.txt exists %d times in the workspaces, want once: %q", len(found), found)
	}
	if b, err := os.ReadFile(found[0]); err != nil || string(b) != content {
		t.Errorf("out.txt = %q, %v; want %q", b, err, content)
	}
}

// TestFaultSIGTERMMidRun sends SIGTERM while the model is still thinking about the run's
// first step: the daemon exits 0 in bounded time with the run saved, and the restarted
// daemon resumes it to completion.
func TestFaultSIGTERMMidRun(t *testing.T) {
	bin := loopbotBinary(t)
	asked := make(chan struct{})
	var first sync.Once
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		late := true
		first.Do(func() { close(asked); late = false })
		if !late {
			// Longer than the test waits for the shutdown, so only SIGTERM ends the call.
			return llmtest.Delay(time.Minute, llmtest.Text("too late"))
		}
		return llmtest.Text("Resumed and finished.")
	}))
	s := newFaultSetup(t, model, "")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}

	start := time.Now()
	p := startLoopbot(t, bin, s.config, s.env, logs)
	res := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "think hard"})
	thread := res["thread"].(string)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model was not asked within 30s; logs:\n%s", logs)
	}
	stopped := p.terminate(25 * time.Second)

	runs := savedRuns(t, s.db)
	if len(runs) != 1 {
		t.Fatalf("after SIGTERM %d runs saved, want 1: %+v", len(runs), runs)
	}
	if st := runs[0].Status; st != agent.StatusRunning && st != agent.StatusQueued {
		t.Fatalf("after SIGTERM the run is %s, want running or queued", st)
	}

	p = startLoopbot(t, bin, s.config, s.env, logs)
	c.waitFor(thread, regexp.MustCompile(`Resumed and finished\.`))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)
	t.Logf("whole test %s, SIGTERM mid-run to exit %s", time.Since(start).Round(time.Millisecond), stopped.Round(time.Millisecond))

	runs = invariants{db: s.db, goals: []string{"think hard"}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 {
		t.Fatalf("after the restart %d runs saved, want 1: %+v", len(runs), runs)
	}
	if runs[0].Status != agent.StatusCompleted || !strings.Contains(runs[0].State.Answer, "Resumed and finished.") {
		t.Errorf("run is %s with answer %q, want completed with the resumed answer", runs[0].Status, runs[0].State.Answer)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2 (the interrupted call, then the resumed one)", n)
	}
}
