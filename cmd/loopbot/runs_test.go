package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

func TestWriteTranscript(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	st := agent.NewState("r1", "clean the tmp dir", nil, now)
	st.Status = agent.StatusCompleted
	st.Step = 2
	st.Plan = []agent.PlanItem{{Step: "list", Status: agent.PlanDone}, {Step: "delete", Status: agent.PlanDone}}
	st.Calls = []agent.CallRecord{
		{ID: "c1", Step: 1, Name: "list_files", Arguments: `{"path":"."}`, Risk: agent.RiskSafe, Status: agent.CallSucceeded, Output: "a\nb"},
		{ID: "c2", Step: 2, Name: "shell", Arguments: `{"command":"rm -rf tmp"}`, Risk: agent.RiskDangerous, RiskReason: "recursive delete",
			Status: agent.CallSucceeded, Decision: &agent.Decision{Approved: true, By: "U2", At: now}},
		{ID: "c3", Step: 2, Name: "shell", Arguments: `{"command":"go test ./..."}`, Risk: agent.RiskConfirm, Status: agent.CallSucceeded,
			GrantedBy: &agent.GrantUse{ID: "g1", Scope: agent.GrantChannel, By: "bob", Describe: "shell matching go test at risk confirm or lower"}},
	}
	st.Grants = []agent.Grant{{ID: "g2", Scope: agent.GrantRun, Tool: "http_fetch", MaxRisk: agent.RiskCautious, By: "bob"}}
	st.Answer = "Deleted tmp."
	rec := &bot.RunRecord{ID: "r1", Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1.2"}, Requester: bot.User{ID: "U1", Name: "ann"},
		Status: st.Status, State: st, CreatedAt: now}
	audit := []bot.AuditEntry{{At: now, Actor: bot.User{ID: "U2", Name: "bob"}, Action: "approve", Tool: "shell", ArgsHash: "0123456789abcdef"},
		// ann changes her mind: her latest rating counts.
		{At: now, Actor: bot.User{ID: "U1", Name: "ann"}, Action: "feedback", Detail: "down"},
		{At: now, Actor: bot.User{ID: "U2", Name: "bob"}, Action: "feedback", Detail: "up"},
		{At: now, Actor: bot.User{ID: "U1", Name: "ann"}, Action: "feedback", Detail: "up"}}
	var b strings.Builder
	if err := writeTranscript(&b, rec, audit, bot.NewRedactor(nil)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Run r1  (completed)", "Goal:      clean the tmp dir", "[x] list", "Step 2", `shell({"command":"rm -rf tmp"})`,
		"risk: dangerous: recursive delete", "approved by U2", "approve by bob (U2)  shell args sha256:0123456789ab", "Answer:\nDeleted tmp.",
		"feedback by ann (U1)  (down)", "Feedback:  2 helpful, 0 not helpful",

		"ran without asking under grant g1 (channel, by bob): shell matching go test at risk confirm or lower",
		"Granted for this run by bob: http_fetch at risk cautious or lower"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeRuns(&b, []*bot.RunRecord{rec}, bot.NewRedactor(nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "r1") || !strings.Contains(b.String(), "completed") || !strings.Contains(b.String(), "clean the tmp dir") {
		t.Errorf("run list:\n%s", b.String())
	}
}

// TestRunsShowIsSafe stores a run whose goal, tool calls, outputs and answer hold the
// configured API key, tokens, a password in a URL and terminal escape sequences, then prints
// it with "loopbot runs show" and "loopbot runs": no secret and no control character but
// newline and tab may reach the terminal.
func TestRunsShowIsSafe(t *testing.T) {
	const (
		apiKey    = "Zq8xW2vN5mK7pL3rT9bY"
		ghToken   = "ghp_R7kQ2mN9pL4vT8wZ3yBx5cV1dF6gH0jK2lM4"
		urlPass   = "s3cr3t-pw"
		title     = "\x1b]0;pwned\x07"
		clear     = "\x1b[2J\x1b[H"
		c1        = "\u009b31m"
		overwrite = "visible\rhidden"
	)
	dir := t.TempDir()
	path := filepath.Join(dir, "loopbot.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	st := agent.NewState("r1", "deploy with key "+apiKey+title, nil, now)
	st.Status = agent.StatusCompleted
	st.Step = 1
	st.Plan = []agent.PlanItem{{Step: "clone https://deploy:" + urlPass + "@git.example.com/app.git" + clear, Status: agent.PlanDone}}
	st.Calls = []agent.CallRecord{{ID: "c1", Step: 1, Name: "shell", Arguments: `{"command":"curl -H 'Authorization: token ` + ghToken + `' https://api.github.com` + c1 + `"}`,
		Risk: agent.RiskConfirm, Status: agent.CallSucceeded, Output: "OPENAI_API_KEY=" + apiKey + "\n" + overwrite + "\x00\x7f",
		Error: "fetch https://deploy:" + urlPass + "@git.example.com failed" + title}}
	st.Answer = "Done; the key is " + apiKey + "\tand the token " + ghToken + clear
	rec := &bot.RunRecord{ID: "r1", Thread: bot.ThreadRef{Platform: "web", Channel: "c" + title, Thread: "t"}, Requester: bot.User{ID: "u", Name: "ann" + clear},
		Status: st.Status, State: st, CreatedAt: now}
	err = db.Update(context.Background(), func(tx bot.Tx) error {
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		return tx.AppendAudit(bot.AuditEntry{At: now, RunID: "r1", Actor: bot.User{ID: "u"}, Action: "approve", Tool: "shell", Detail: "ok " + apiKey + title})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"runs", "show", "r1"}, {"runs"}} {
		m := NewMain()
		var out bytes.Buffer
		m.Stdout, m.Stderr = &out, io.Discard
		m.Getenv = func(k string) string {
			if k == "OPENAI_API_KEY" {
				return apiKey
			}
			return ""
		}
		if err := m.ParseFlags(context.Background(), append([]string{"-db", path}, args...)); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(context.Background()); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		got := out.String()
		if !strings.Contains(got, "r1") || !strings.Contains(got, "[redacted]") {
			t.Errorf("%q printed no run or redacted nothing:\n%s", args, got)
		}
		for _, secret := range []string{apiKey, apiKey[:16], ghToken, urlPass} {
			if strings.Contains(got, secret) {
				t.Errorf("%q printed %q:\n%s", args, secret, got)
			}
		}
		for _, r := range got {
			if r != '\n' && r != '\t' && (r < ' ' || r >= 0x7f && r <= 0x9f) {
				t.Errorf("%q printed the control character %U:\n%q", args, r, got)
				break
			}
		}
		if strings.Contains(got, "]0;pwned") || strings.Contains(got, "[2J") || strings.Contains(got, "31m") {
			t.Errorf("%q printed the rest of an escape sequence:\n%q", args, got)
		}
	}
}

func TestTerminalText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain\ttext\nnext", "plain\ttext\nnext"},
		{"a\x1b]0;title\x07b", "ab"},
		{"a\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"},
		{"\x1b[2J\x1b[1;1Hclean", "clean"},
		{"\x1b[31mred\x1b[0m", "red"},
		{"\u009b2Jc1", "c1"},
		{"over\rwrite\x00\x7f\b", "overwrite"},
		{"bad \x9b byte", "bad \uFFFD byte"},
		{"abc\u202eevil", "abcevil"},
		{"cut \x1b", "cut "},
	}
	for _, tt := range tests {
		if got := terminalText(tt.in); got != tt.want {
			t.Errorf("terminalText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
