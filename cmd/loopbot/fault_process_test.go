package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The process fault tests SIGKILL the daemon where a crash hurts most: while a tool with side
// effects runs in its sandbox, and while many runs commit at once.

// awaitCond polls cond until it holds, failing the test after limit. It is for conditions
// outside the daemon's streams: files a sandboxed command writes, processes, metrics.
func awaitCond(t *testing.T, what string, limit time.Duration, cond func() bool, explain ...func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			var more []string
			for _, f := range explain {
				more = append(more, f())
			}
			t.Fatalf("%s: not within %s\n%s", what, limit, strings.Join(more, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// enableShell turns the shell tool on in the setup's config file, which newFaultSetup
// writes with it off. The tool refuses every command without bubblewrap and prlimit, so the
// test skips without them, naming what to install (and fails under CI).
func enableShell(t *testing.T, s *faultSetup) {
	t.Helper()
	lookOrSkip(t, "bwrap")
	lookOrSkip(t, "prlimit")
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "[tools.shell]\nenabled = false\n", "[tools.shell]\nenabled = true\n", 1)
	if cfg == string(b) {
		t.Fatalf("no [tools.shell] section to enable in:\n%s", b)
	}
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon finds bwrap on its PATH, which the fault setup's environment leaves out.
	s.env = append(s.env, "PATH="+os.Getenv("PATH"))
}

// procInfo is what /proc says of one process.
type procInfo struct {
	ppid    int
	state   string
	cmdline string
}

// procTable reads /proc: every process with its parent, state and command line.
func procTable() map[int]procInfo {
	out := map[int]procInfo{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = procInfo{ppid: ppid, state: f[0], cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))}
	}
	return out
}

// descendants returns the processes below pid, with their command lines.
func descendants(pid int) map[int]string {
	all := procTable()
	out := map[int]string{}
	for changed := true; changed; {
		changed = false
		for p, info := range all {
			if _, seen := out[p]; seen {
				continue
			}
			if _, parent := out[info.ppid]; info.ppid == pid || parent {
				out[p] = info.cmdline
				changed = true
			}
		}
	}
	return out
}

// stillAlive returns those of procs that still run: a zombie, or a process that has since taken
// a reused PID with another command line, does not count.
func stillAlive(procs map[int]string) map[int]string {
	now := procTable()
	out := map[int]string{}
	for pid, cmd := range procs {
		if info, ok := now[pid]; ok && info.state != "Z" && info.state != "X" && info.cmdline == cmd {
			out[pid] = cmd
		}
	}
	return out
}

// TestFaultKill9WhileNonIdempotentToolRuns SIGKILLs the daemon while an approved shell
// command runs in its sandbox. The sandbox must die with the daemon, and the restarted
// daemon must not run the command again: the call's outcome is unknown, the model is told
// so, and the run finishes with the command's effect recorded once.
//
// A command that writes a file is rated confirm by the shell's assessor and config can only
// raise a risk, never lower it, so the call is approved in the console first.
func TestFaultKill9WhileNonIdempotentToolRuns(t *testing.T) {
	bin := loopbotBinary(t)
	const command = "echo start >> ran.txt; sleep 30; echo end >> ran.txt"
	const answer = "The outcome of the command is unknown, so I did not run it again."
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if r.LastMessage().Role == "tool" {
			return llmtest.Text(answer)
		}
		return llmtest.ToolCalls(llmtest.Call("shell", fmt.Sprintf(`{"command":%q}`, command)))
	}))
	s := newFaultSetup(t, model, fastEdits)
	enableShell(t, &s)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "run the slow recorded command"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)
	ran := approveSlowCommand(t, s, c, thread)
	// The shell writes "start" before it forks sleep, so the sleep may come a moment later.
	var sandbox map[int]string
	awaitCond(t, "sleep 30 runs among the daemon's descendants", 10*time.Second, func() bool {
		sandbox = descendants(p.cmd.Process.Pid)
		for _, cmd := range sandbox {
			if cmd == "sleep 30" {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("descendants: %v", sandbox) })
	p.kill()
	// --die-with-parent and the sandbox's PID namespace take the command down with the
	// daemon; a survivor would write "end" in half a minute.
	awaitCond(t, "the sandboxed command dies with the daemon", 10*time.Second, func() bool { return len(stillAlive(sandbox)) == 0 })

	p = startLoopbot(t, bin, s.config, s.env, logs)
	c.waitFor(thread, regexp.MustCompile(regexp.QuoteMeta(answer)))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v, want one completed", runs)
	}
	calls := runs[0].State.Calls
	if len(calls) != 1 || calls[0].Name != "shell" || calls[0].Status != agent.CallUnknown || calls[0].Attempts != 1 ||
		!strings.Contains(calls[0].Error, "outcome unknown") {
		t.Errorf("calls = %+v, want the one shell call with an unknown outcome after one attempt", calls)
	}
	if !strings.Contains(shown, "did not run it again") {
		t.Errorf("the thread was not told the command's outcome is unknown:\n%s", shown)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2 (the call, then the answer after the restart)", len(reqs))
	}
	if last := reqs[1].LastMessage(); last.Role != "tool" || !strings.Contains(last.Content, "outcome unknown") {
		t.Errorf("after the restart the model got %s message %q, want the call's outcome reported unknown", last.Role, last.Content)
	}
	if b, err := os.ReadFile(ran); err != nil || string(b) != "start\n" {
		t.Errorf("ran.txt = %q, %v; want the one start of the one run, and no end", b, err)
	}
}

// approveSlowCommand approves the shell call the thread's card asks for and waits until the
// command has written its start to ran.txt in the run's workspace, whose path it returns.
func approveSlowCommand(t *testing.T, s faultSetup, c consoleClient, thread string) string {
	t.Helper()
	if n := c.press(thread, c.waitFor(thread, approveButton)[1], "ann", 2); n != "" {
		t.Fatalf("approving the shell call was refused: %q", n)
	}
	var ran string
	awaitCond(t, "the shell command writes start to ran.txt", 30*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(s.dir, "ws", "*", "ran.txt"))
		if len(found) != 1 {
			return false
		}
		b, _ := os.ReadFile(found[0])
		ran = found[0]
		return string(b) == "start\n"
	}, func() string { return c.threadText(thread) + "\nlogs:\n" + c.logs.String() })
	return ran
}

// consolePost is the outcome of a console POST that the test judges itself: made from a
// goroutine, which must not fail the test, or expected to be refused.
type consolePost struct {
	status int
	body   map[string]any
	err    error
}

// postConsole posts body as JSON, with the headers the console's page sends.
func postConsole(url string, body map[string]string) consolePost {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		return consolePost{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Loopbot", "1")
	signIn(req, body["user"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return consolePost{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	res := consolePost{status: resp.StatusCode, err: err}
	if err == nil {
		res.err = json.Unmarshal(raw, &res.body)
	}
	return res
}

// loggedAdminAddr reads the admin address the daemon logged when it came up last.
func loggedAdminAddr(t *testing.T, logs string) string {
	t.Helper()
	m := regexp.MustCompile(`loopbot is up".*admin=(\S+)`).FindAllStringSubmatch(logs, -1)
	if len(m) == 0 {
		t.Fatalf("no admin address in the log:\n%s", logs)
	}
	return m[len(m)-1][1]
}

// runCounts reads the loopbot_runs gauge of /metrics: runs in the database by state.
func runCounts(admin string) map[string]int {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^loopbot_runs\{state="(\w+)"\} (\d+)$`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// TestFaultKill9DuringCommitBurst posts many goals at once, each a few quick steps with
// idempotent tools, and SIGKILLs the daemon while their runs commit. After the restart the
// goals whose submission got no answer are submitted again with the same ID, as the page
// does. Every goal must end with exactly one run, completed.
func TestFaultKill9DuringCommitBurst(t *testing.T) {
	bin := loopbotBinary(t)
	const goals = 50
	const killAfter = 40 // model requests, of about 3 per goal
	var asked atomic.Int32
	killNow := make(chan struct{})
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if asked.Add(1) == killAfter {
			close(killNow)
		}
		goal, tools := "", 0
		for _, m := range r.Messages {
			switch {
			case m.Role == "user" && goal == "":
				goal = m.Content
			case m.Role == "tool":
				tools++
			}
		}
		switch tools {
		case 0:
			return llmtest.ToolCalls(llmtest.Call("update_plan", `{"plan":[{"step":"look","status":"in_progress"}]}`))
		case 1:
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		}
		return llmtest.Text("Finished: " + goal)
	}))
	s := newFaultSetup(t, model, "[bot]\nedit_interval = \"20ms\"\nmax_concurrent_runs = 50\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	ids := make([]string, goals)
	texts := make([]string, goals)
	results := make([]consolePost, goals)
	for i := range goals {
		ids[i], texts[i] = uuid(i), fmt.Sprintf("burst goal %02d", i)
	}
	var wg sync.WaitGroup
	next := atomic.Int32{}
	for range 10 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < goals; i = int(next.Add(1)) - 1 {
				results[i] = postConsole(c.url+"/api/threads", map[string]string{"id": ids[i], "user": "ann", "text": texts[i]})
			}
		})
	}
	select {
	case <-killNow:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model got %d requests in 30s, want %d before the kill; logs:\n%s", asked.Load(), killAfter, logs)
	}
	p.kill()
	wg.Wait()

	p = startLoopbot(t, bin, s.config, s.env, logs)
	// A goal the console did not answer before the kill is submitted again with the same
	// ID, as the page does. Its claim commits with its run or not at all, so a duplicate
	// means the run is stored, and every goal must end with exactly one run.
	resent, dups := 0, 0
	for i, r := range results {
		if r.err == nil && r.status == http.StatusCreated {
			continue
		}
		resent++
		again := postConsole(c.url+"/api/threads", map[string]string{"id": ids[i], "user": "ann", "text": texts[i]})
		if again.err != nil || again.status != http.StatusCreated {
			t.Fatalf("goal %d submitted again after the restart: %d %v %v", i, again.status, again.body, again.err)
		}
		if again.body["duplicate"] == true {
			dups++
		}
	}
	t.Logf("%d goals had no answer before the kill and were submitted again, %d of them already taken; the model was asked %d times before the kill",
		resent, dups, killAfter)

	admin := loggedAdminAddr(t, logs.String())
	awaitCond(t, "every run ends after the restart", 60*time.Second, func() bool {
		n := runCounts(admin)
		return n != nil && n["completed"] >= goals &&
			n["queued"]+n["running"]+n["awaiting_approval"]+n["awaiting_input"] == 0
	})
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: texts, logs: logs.String(), settled: true}.check(t)
	for _, r := range runs {
		if r.Status != agent.StatusCompleted || r.State.Answer != "Finished: "+r.State.Goal {
			t.Errorf("run of %q is %s with answer %q, want completed with its own answer", r.State.Goal, r.Status, r.State.Answer)
		}
		for _, call := range r.State.Calls {
			if call.Status != agent.CallSucceeded {
				t.Errorf("run of %q: %s is %s: %s", r.State.Goal, call.Name, call.Status, call.Error)
			}
		}
	}
	if len(runs) != goals {
		t.Errorf("%d runs for %d goals", len(runs), goals)
	}
}
