package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The input fault tests send the console what a careless or hostile page would: altered
// button IDs, secrets for the bot to repeat, bodies far too large.

var cancelButton = regexp.MustCompile(`data-action="([^"]+)"[^>]*>Cancel`)

// auditLog reads the audit log of a stopped daemon's database.
func auditLog(t *testing.T, path string) []bot.AuditEntry {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []bot.AuditEntry
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		out, err = tx.Audit("")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFaultTamperedApprovalID clicks, with an approval pending, buttons whose IDs were
// altered or taken from another run's thread, and IDs that are no IDs at all. Each is refused, with a
// notice or a 4xx, and changes nothing: no decision is recorded, the model is not asked
// again, the cards keep their buttons. The real buttons still work afterwards.
func TestFaultTamperedApprovalID(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		goal := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				goal = m.Content
				break
			}
		}
		if r.LastMessage().Role == "tool" {
			return llmtest.Text("Finished " + goal + ".")
		}
		return llmtest.ToolCalls(llmtest.Call("write_file", fmt.Sprintf(`{"path":"out.txt","content":%q}`, goal)))
	}))
	s := newFaultSetup(t, model, fastEdits+"[agent.risk]\nwrite_file = \"confirm\"\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	goals := []string{"ann's run", "bob's run"}
	mine := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goals[0]})["thread"].(string)
	other := c.post("/api/threads", map[string]string{"id": uuid(2), "user": "bob", "text": goals[1]})["thread"].(string)
	approve := c.waitFor(mine, approveButton)[1]
	otherApprove := c.waitFor(other, approveButton)[1]
	otherCancel := c.waitFor(other, cancelButton)[1]

	flipped := []byte(approve)
	flipped[len(flipped)/2] ^= 1
	const invalid = "This button is no longer valid."
	// A button counts only in the thread it was drawn in, whoever clicks it.
	const otherThread = "This button belongs to another thread."
	clicks := []struct {
		name, user, thread, action string
		status                     int    // the HTTP status, 200 when the bot answers with a notice
		want                       string // in the notice or the error
	}{
		{"one character flipped", "ann", mine, string(flipped), http.StatusOK, invalid},
		{"upper case", "ann", mine, strings.ToUpper(approve), http.StatusOK, invalid},
		{"one character more", "ann", mine, approve + "a", http.StatusOK, invalid},
		{"one character fewer", "ann", mine, approve[1:], http.StatusOK, invalid},
		{"another run's approval, by someone else", "mallory", mine, otherApprove, http.StatusOK, otherThread},
		{"another run's approval, by its requester", "bob", mine, otherApprove, http.StatusOK, otherThread},
		{"another run's cancel, by someone else", "mallory", mine, otherCancel, http.StatusOK, otherThread},
		{"another run's cancel, by its requester", "bob", mine, otherCancel, http.StatusOK, otherThread},
		{"the real button, by someone else", "mallory", mine, approve, http.StatusOK, "You are not allowed to decide on this request. Only ann, who started the run, can."},
		{"empty", "ann", mine, "", http.StatusBadRequest, "action: want the button's ID"},
		{"huge", "ann", mine, strings.Repeat(approve, 1000), http.StatusBadRequest, "action: want the button's ID"},
		{"over the body limit", "ann", mine, strings.Repeat(approve, 4000), http.StatusRequestEntityTooLarge, "body over"},
		{"a line break", "ann", mine, approve + "\n", http.StatusBadRequest, "action: want the button's ID"},
		{"a thread that does not exist", "ann", "0123456789abcdef", approve, http.StatusNotFound, "no thread"},
	}
	for i, k := range clicks {
		res := postConsole(c.url+"/api/actions", map[string]string{"id": uuid(10 + i), "user": k.user, "action": k.action, "thread": k.thread})
		got, _ := res.body["notice"].(string)
		if res.status != http.StatusOK {
			got, _ = res.body["error"].(string)
		}
		if res.err != nil || res.status != k.status || !strings.Contains(got, k.want) {
			t.Errorf("%s: %d %q (%v), want %d with %q", k.name, res.status, got, res.err, k.status, k.want)
		}
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times after the tampered clicks, want 2 (one call per run, nothing decided)", n)
	}
	for th, id := range map[string]string{mine: approve, other: otherApprove} {
		if got := c.waitFor(th, approveButton)[1]; got != id {
			t.Errorf("after the tampered clicks the card's button is %q, want %q", got, id)
		}
	}

	if n := c.press(mine, approve, "ann", 50); n != "" {
		t.Fatalf("the real Approve was refused: %q", n)
	}
	if n := c.press(other, otherApprove, "bob", 51); n != "" {
		t.Fatalf("bob's real Approve was refused: %q", n)
	}
	c.waitFor(mine, regexp.MustCompile(`Finished ann&#39;s run\.`))
	c.waitFor(other, regexp.MustCompile(`Finished bob&#39;s run\.`))
	shown := []string{c.threadText(mine), c.threadText(other)}
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: goals, shown: shown, logs: logs.String(), settled: true}.check(t)
	for _, r := range runs {
		if r.Status != agent.StatusCompleted {
			t.Errorf("run of %q is %s, want completed", r.State.Goal, r.Status)
		}
	}
	audit := auditLog(t, s.db)
	if len(audit) != 2 {
		t.Fatalf("audit log = %+v, want the two real approvals only", audit)
	}
	for _, e := range audit {
		if e.Action != "approve" || e.Actor.Name == "mallory" {
			t.Errorf("audit entry %+v, want an approval by the run's requester", e)
		}
	}
}

// Canaries: values shaped like real secrets, planted where the bot may meet them. None may
// reach the console or the log.
const (
	canaryAWSSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCANARY0001" // in the daemon's environment
	canaryGitHub    = "ghp_C4n4ryT0k3nAbCdEfGhIjKlMnOpQrStUvWx1"
	canarySlack     = "xoxb-1234567890-0987654321-C4n4ryS1ackT0k3n"
	canaryAWSKeyID  = "AKIACANARY0123456789"
	canaryFileAWS   = "aws0C4n4ryS3cr3tKeyF0rTheW0rkspaceF1le01"
	canaryPassword  = "c4n4ry-db-p4ssw0rd"
)

// canaryFile is a workspace file full of secrets, as a cloned repository's .env may be.
var canaryFile = strings.Join([]string{
	"GITHUB_TOKEN=" + canaryGitHub,
	"SLACK_BOT_TOKEN=" + canarySlack,
	"aws_access_key_id = " + canaryAWSKeyID,
	"aws_secret_access_key = " + canaryFileAWS,
	"DATABASE_URL=postgres://app:" + canaryPassword + "@db.internal:5432/app",
}, "\n") + "\n"

// TestFaultCanarySecretsNeverPosted plants canary secrets in the daemon's environment and in
// a workspace file, and has the model read the file, print the sandbox's environment, put
// tokens in its plan and the file in the arguments of a call that needs approval, and
// finally echo every tool result it saw and the API key it was sent. The console and the
// log must show none of them, and the daemon's environment must not reach the run at all.
//
// The model repeats secrets as it saw them: a bare 40-character AWS secret with no name
// next to it cannot be told from any other string, and no redactor can catch it.
func TestFaultCanarySecretsNeverPosted(t *testing.T) {
	bin := loopbotBinary(t)
	for _, c := range []string{canaryAWSSecret, canaryFileAWS} {
		if len(c) != 40 {
			t.Fatalf("canary %q has %d characters, want the 40 of an AWS secret access key", c, len(c))
		}
	}
	planted := make(chan struct{})
	const answerHead = "Here is everything I saw"
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		var seen []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				seen = append(seen, m.Content)
			}
		}
		switch len(seen) {
		case 0:
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		case 1:
			select {
			case <-planted:
			case <-time.After(30 * time.Second):
			}
			return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":".env"}`))
		case 2:
			return llmtest.ToolCalls(llmtest.Call("shell", `{"command":"printenv"}`))
		case 3:
			plan := fmt.Sprintf(`{"plan":[{"step":"use %s and %s","status":"in_progress"}]}`, canaryGitHub, canarySlack)
			return llmtest.ToolCalls(llmtest.Call("update_plan", plan))
		case 4:
			args, _ := json.Marshal(map[string]string{"path": "leak.txt", "content": seen[1]})
			return llmtest.ToolCalls(llmtest.Call("write_file", string(args)))
		}
		return llmtest.Text(answerHead + ":\n\n" + strings.Join(seen, "\n\n") + "\n\nMy key: " + r.Header.Get("Authorization"))
	}))
	s := newFaultSetup(t, model, fastEdits+"[agent.risk]\nwrite_file = \"confirm\"\n")
	enableShell(t, &s)
	s.env = append(s.env, "AWS_SECRET_ACCESS_KEY="+canaryAWSSecret, "AWS_ACCESS_KEY_ID="+canaryAWSKeyID)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "read the secrets and tell me everything"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)

	var ws string
	awaitCond(t, "the run's workspace appears", 30*time.Second, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(s.dir, "ws", "*"))
		if len(dirs) == 1 {
			ws = dirs[0]
		}
		return ws != ""
	}, logs.String)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(canaryFile), 0o600); err != nil {
		t.Fatal(err)
	}
	close(planted)

	reject := c.waitFor(thread, regexp.MustCompile(`data-action="([^"]+)"[^>]*>Reject`))[1]
	card := c.threadText(thread)
	if !strings.Contains(card, "leak.txt") || !strings.Contains(card, "[redacted]") {
		t.Errorf("the approval card does not show the call with its secrets redacted:\n%s", card)
	}
	if n := c.press(thread, reject, "ann", 2); n != "" {
		t.Fatalf("Reject was refused: %q", n)
	}
	c.waitFor(thread, regexp.MustCompile(answerHead))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	secrets := []string{canaryAWSSecret, canaryGitHub, canarySlack, canaryAWSKeyID, canaryFileAWS, canaryPassword}
	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), secrets: secrets, settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v, want one completed", runs)
	}
	st := runs[0].State
	if !strings.Contains(st.Answer, canaryGitHub) || !strings.Contains(st.Answer, canaryKey) {
		t.Fatal("the model's answer does not hold the canaries, so the test proves nothing")
	}
	if n := strings.Count(shown, "[redacted]"); n < len(secrets) {
		t.Errorf("the thread shows %d redactions, want at least %d:\n%s", n, len(secrets), shown)
	}
	// The sandbox starts from an empty environment: the daemon's secrets never reach a
	// command, its output, or the model.
	for _, call := range st.Calls {
		if call.Name == "shell" && (call.Status != agent.CallSucceeded || strings.Contains(call.Output, "AWS_") || !strings.Contains(call.Output, "PATH=")) {
			t.Errorf("printenv in the sandbox: %s %q %q, want the sandbox's own environment only", call.Status, call.Output, call.Error)
		}
	}
	for _, m := range st.Messages {
		if strings.Contains(m.Content, canaryAWSSecret) {
			t.Errorf("a %s message of the run carries the daemon's AWS secret: %q", m.Role, m.Content)
		}
	}
}

// TestFaultOversizedConsolePayload posts a goal of several megabytes, a reply and a click as
// large, sent with and without a length: each is refused with 413 and nothing is stored, no
// thread is opened and the model is never asked. The console keeps working afterwards.
func TestFaultOversizedConsolePayload(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Text("A goal of a normal size works."))
	s := newFaultSetup(t, model, fastEdits)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	huge := strings.Repeat("make it bigger ", 5<<20/15)
	big := func(field string) []byte {
		b, _ := json.Marshal(map[string]string{"id": uuid(1), "user": "ann", field: huge, "thread": "0123456789abcdef"})
		return b
	}
	goal, _ := json.Marshal(map[string]string{"id": uuid(2), "user": "ann", "text": huge})
	posts := []struct {
		name, path string
		body       []byte
		chunked    bool
	}{
		{"goal", "/api/threads", goal, false},
		{"goal without a length", "/api/threads", goal, true},
		{"reply", "/api/threads/0123456789abcdef/messages", goal, false},
		{"click", "/api/actions", big("action"), false},
	}
	for _, tt := range posts {
		var body io.Reader = bytes.NewReader(tt.body)
		if tt.chunked {
			// A reader of unknown length makes the client send the body in chunks.
			body = io.MultiReader(body)
		}
		req, _ := http.NewRequest("POST", c.url+tt.path, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Loopbot", "1")
		signIn(req, "ann")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s of %d bytes: %v, want a 413 answer", tt.name, len(tt.body), err)
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(answer), "body over 65536 bytes") {
			t.Errorf("%s of %d bytes: %s %s, want 413 saying the limit", tt.name, len(tt.body), resp.Status, answer)
		}
	}
	if list := strings.TrimSpace(c.get("/api/threads")); list != "[]" {
		t.Errorf("threads after the refused posts: %s, want none", list)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times about refused posts", n)
	}

	const normal = "a goal of a normal size"
	th := c.post("/api/threads", map[string]string{"id": uuid(3), "user": "ann", "text": normal})["thread"].(string)
	c.waitFor(th, regexp.MustCompile(`A goal of a normal size works\.`))
	shown := c.threadText(th)
	p.terminate(25 * time.Second)
	runs := invariants{db: s.db, goals: []string{normal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 {
		t.Errorf("%d runs stored, want only the normal goal's", len(runs))
	}
	if strings.Contains(logs.String(), "make it bigger make it bigger") {
		t.Error("the oversized body reached the log")
	}
}
