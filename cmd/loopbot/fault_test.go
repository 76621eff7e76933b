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
)

// The fault tests run the real binary against the scripted model and break it as the
// operating system would: SIGKILL with an approval pending, SIGTERM in the middle of a model
// call. Each one then restarts it on the same database and console address and checks that
// the run is neither lost nor repeated.

// canaryKey is the API key the daemon is given; it must never reach a chat message or a log.
const canaryKey = "sk-canary-7f3c9e1d2b4a6f8e0c5d"

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
[tools]
workspace = %q
[tools.shell]
enabled = false
%s`, s.db, freeAddr(t), s.web, filepath.Join(dir, "ws"), extra)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"HOME=" + dir, "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=" + canaryKey}
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

	if strings.Contains(shown, "sk-canary") {
		t.Errorf("the API key was posted to the thread:\n%s", shown)
	}
	if strings.Contains(logs.String(), "sk-canary") {
		t.Errorf("the API key is in the daemon's log:\n%s", logs)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2 (the tool call, then the answer)", n)
	}

	runs := savedRuns(t, s.db)
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
	p.terminate(25 * time.Second)
	t.Logf("whole test %s, SIGTERM mid-run to exit %s", time.Since(start).Round(time.Millisecond), stopped.Round(time.Millisecond))

	runs = savedRuns(t, s.db)
	if len(runs) != 1 {
		t.Fatalf("after the restart %d runs saved, want 1: %+v", len(runs), runs)
	}
	if runs[0].Status != agent.StatusCompleted || !strings.Contains(runs[0].State.Answer, "Resumed and finished.") {
		t.Errorf("run is %s with answer %q, want completed with the resumed answer", runs[0].Status, runs[0].State.Answer)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2 (the interrupted call, then the resumed one)", n)
	}
	if strings.Contains(logs.String(), "sk-canary") {
		t.Errorf("the API key is in the daemon's log:\n%s", logs)
	}
}
