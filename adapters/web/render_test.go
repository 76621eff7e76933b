package web

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name.golden, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to write it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n got:\n%s\nwant:\n%s", name, path, got, want)
	}
}

func TestRenderMessageGolden(t *testing.T) {
	xss := `<script>alert(1)</script><img src=x onerror=alert(1)>`
	tests := []struct {
		name string
		msg  bot.Message
	}{
		{"status_plan", bot.Message{
			Kind: bot.KindStatus, Title: "Announce the release", Text: "Working: s3: write the announcement (executor s3)",
			Plan: []bot.PlanLine{
				{Text: "s1: find the release date", Status: "done"},
				{Text: "s2: find the price", Status: "done"},
				{Text: "s3: write the announcement (executor s3)", Status: "in_progress"},
				{Text: "s4: post it (executor s4, waiting for approval)", Status: "in_progress"},
			},
			Fields:  []bot.Field{{Name: "Question from executor s3", Value: "Which date format?\nPlanner: 3 March 2027, as in the changelog."}},
			Footer:  "Step 9 · 41s · 8120 tokens · $0.0162",
			Buttons: []bot.Button{{ID: "cancelplan", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
		}},
		{"status", bot.Message{
			Kind: bot.KindStatus, Title: "Summarise the open issues", Text: "Working: reading issue 12",
			Plan: []bot.PlanLine{
				{Text: "List the issues", Status: "done"},
				{Text: "Read each one", Status: "in_progress"},
				{Text: "Write the summary", Status: "pending"},
				{Text: "Fetch the wiki", Status: "failed"},
			},
			Footer:  "Step 3 · 12s · 1200 tokens · $0.0040",
			Buttons: []bot.Button{{ID: "act-cancel-1", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
		}},
		{"approval", bot.Message{
			Kind: bot.KindApproval, Title: "Approve shell?", Text: "The run wants to call shell. Approve to run it once with exactly these arguments.",
			Fields: []bot.Field{
				{Name: "Arguments", Value: "{\n  \"command\": \"rm -rf build && echo '<done>'\"\n}", Code: true},
				{Name: "Risk", Value: "confirm"},
				{Name: "Why", Value: "deletes files"},
			},
			Buttons: []bot.Button{
				{ID: "act-approve-1", Label: "Approve", Style: bot.StylePrimary},
				{ID: "act-reject-1", Label: "Reject", Style: bot.StyleDanger},
			},
			Footer: "Requested by ann's run",
		}},
		{"approval_decided", bot.Message{
			Kind: bot.KindApproval, Title: "shell: approved", Text: "Approved by bob at 2026-01-02 15:04 UTC.",
			Fields: []bot.Field{{Name: "Arguments", Value: `{"command":"make"}`, Code: true}, {Name: "Risk", Value: "confirm"}},
			Footer: "Requested by ann's run",
		}},
		{"answer", bot.Message{
			Kind: bot.KindAnswer,
			Text: "## Summary\n\nThere are **3** open issues:\n\n1. `#12` crash on start\n2. slow _search_\n3. see [the tracker](https://example.com/issues?state=open)\n\n```\ngo test ./...\n```",
		}},
		{"answer_rated", bot.Message{
			Kind: bot.KindAnswer, Text: "The answer is **42**.",
			Buttons: []bot.Button{
				{ID: "up00000000000000000000000000000a", Label: "👍 Helpful", Feedback: bot.FeedbackUp},
				{ID: "down000000000000000000000000000b", Label: "👎 Not helpful", Feedback: bot.FeedbackDown},
			},
		}},
		{"failure", bot.Message{
			Kind: bot.KindFailure, Title: "Run failed",
			Text: "3 tool calls failed in a row.\n\nDone: listed the issues.\nNot done: the summary.",
		}},
		{"question", bot.Message{
			Kind: bot.KindQuestion, Title: "The run needs you", Text: "The same call failed 3 times. Continue?",
			Footer:  "Reply in this thread with instructions, or choose:",
			Buttons: []bot.Button{{ID: "act-continue", Label: "Continue", Style: bot.StylePrimary}, {ID: "act-stop", Label: "Stop", Style: bot.StyleDanger}},
		}},
		// The demo's answer quotes the goal: a quote, not a ">".
		{"answer_quote", bot.Message{
			Kind: bot.KindAnswer,
			Text: "Done. I looked at the workspace and wrote **report.md** with a short report on your goal:\n\n> deploy the site\n\n(This is loopbot's demo mode.)",
		}},
		// write_file's content shows as the file it will be, not a JSON string.
		{"approval_file", bot.Message{
			Kind: bot.KindApproval, Title: "Approve write_file?", Text: "The run wants to call write_file.",
			Fields: []bot.Field{
				{Name: "Arguments", Value: "{\n  \"path\": \"report.md\",\n  \"content\": \"# Demo report\\n\\n<b>Goal</b>: deploy\\n\",\n  \"mode\": {\"append\": false}\n}", Code: true},
				{Name: "Risk", Value: "confirm"},
			},
			Buttons: []bot.Button{{ID: "act-approve-2", Label: "Approve", Style: bot.StylePrimary}, {ID: "act-reject-2", Label: "Reject", Style: bot.StyleDanger}},
		}},
		// A write that replaces a file shows the diff, lines marked.
		{"approval_diff", bot.Message{
			Kind: bot.KindApproval, Title: "Approve write_file?", Text: "The run wants to call write_file.",
			Fields: []bot.Field{
				{Name: "Arguments", Value: "{\n  \"path\": \"report.md\",\n  \"content\": \"# Report\\n<b>new</b>\\n\"\n}", Code: true},
				{Name: "Risk", Value: "confirm"},
				{Name: "Changes", Value: "--- report.md (now)\n+++ report.md (after this call)\n@@ -1,2 +1,2 @@\n # Report\n-old <i>\n+<b>new</b>", Code: true},
			},
			Buttons: []bot.Button{{ID: "act-approve-3", Label: "Approve", Style: bot.StylePrimary}, {ID: "act-reject-3", Label: "Reject", Style: bot.StyleDanger}},
		}},
		// Cut arguments are no JSON object: they stay the code field they were.
		{"approval_cut", bot.Message{
			Kind: bot.KindApproval, Title: "Approve write_file?",
			Fields: []bot.Field{{Name: "Arguments", Value: "{\n  \"content\": \"a\\nb\n(cut: the run's transcript has the full arguments)", Code: true}},
		}},
		{"question_chosen", bot.Message{
			Kind: bot.KindQuestion, Title: "The run needs you", Text: "The same call failed 3 times. Continue?",
			Footer: "Continue: chosen by you at 10:04 UTC.",
		}},
		// Tool calls as collapsible steps, older ones counted.
		{"status_steps", bot.Message{
			Kind: bot.KindStatus, Title: "Look around", Text: "Working: write_file",
			Steps: []bot.Step{
				{ID: "call_1", Tool: "list_files", Args: "path: .", Result: "report.md 12 B\n<b>x</b>/", Status: bot.StepDone, Duration: 12 * time.Millisecond},
				{ID: "call_2", Tool: "shell", Args: "command: make", Result: "exit status 2", Status: bot.StepFailed, Duration: 2100 * time.Millisecond},
				{ID: "call_3", Tool: "write_file", Args: "path: r.md\ncontent:\n  # R", Status: bot.StepWaiting},
				{ID: `x" onclick="y`, Tool: "<b>", Status: `done" onclick="alert(1)`},
			},
			EarlierSteps: 3,
			Footer:       "Step 4 · 3s · 100 tokens · $0.0001",
		}},
		// The files a run wrote link to their view.
		{"answer_files", bot.Message{
			Kind: bot.KindAnswer, Text: "Done.", Footer: "Files written: report.md, a b/<x>.md",
			Files: []string{"report.md", "a b/<x>.md"}, Workspace: "run-1",
		}},
		{"notice", bot.Message{Kind: bot.KindNotice, Text: "Queued bob's request; it starts when the current run in this thread ends (1 waiting)."}},
		{"answer_save", bot.Message{Kind: bot.KindAnswer, Text: "There are **3** open issues.",
			Buttons: []bot.Button{{ID: "act-save-1", Label: "Save as playbook"}}}},
		{"memory", bot.Message{
			Kind: bot.KindNotice, Title: "Remembered for this channel",
			Text:    "1. the staging database is db-stage-2 (ann, 2026-11-27)\n2. deploys happen on tuesdays (bob, 2026-11-27)",
			Buttons: []bot.Button{{ID: "act-forget-1", Label: "Forget 1", Style: bot.StyleDanger}, {ID: "act-forget-2", Label: "Forget 2", Style: bot.StyleDanger}},
			Footer:  "Runs in this channel are given these facts. Forget removes one.",
		}},
		{"unknown_kind", bot.Message{Kind: "\"><script>", Text: "shown as a notice"}},
		{"approval_grants", bot.Message{
			Kind: bot.KindApproval, Title: "Approve shell?",
			Text: "The run wants to call shell. Approve once runs it once with exactly these arguments. Approve for this run also lets later shell calls at risk confirm or lower run without asking. Always allow here (approvers only) lets shell go test run in this channel until revoked.",
			Fields: []bot.Field{
				{Name: "Arguments", Value: "{\n  \"command\": \"go test ./...\"\n}", Code: true},
				{Name: "Risk", Value: "confirm"},
				{Name: "Always allow here covers", Value: "shell go test", Code: true},
			},
			Footer: "Run started by ann",
			Buttons: []bot.Button{
				{ID: "act-once-1", Label: "Approve once", Style: bot.StylePrimary},
				{ID: "act-run-1", Label: "Approve for this run"},
				{ID: "act-always-1", Label: "Always allow here"},
				{ID: "act-reject-3", Label: "Reject", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
				{ID: "act-rejstop-1", Label: "Reject and stop", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
			},
		}},
		{"grants", bot.Message{
			Kind: bot.KindGrants, Title: "Grants in this channel",
			Text: "Calls these cover run without asking, in every run of this channel. Dangerous calls always ask.",
			Fields: []bot.Field{
				{Name: "shell go test", Value: "up to confirm, by boss on 2026-11-27"},
				{Name: "http_fetch GET https://api.example.com", Value: "up to confirm, by boss on 2026-11-27"},
			},
			Buttons: []bot.Button{
				{ID: "act-revoke-1", Label: "Revoke shell go test", Style: bot.StyleDanger},
				{ID: "act-revoke-2", Label: "Revoke http_fetch GET https://api.example.com", Style: bot.StyleDanger},
			},
		}},
		{"status_pause", bot.Message{
			Kind: bot.KindStatus, Title: "Summarise the open issues", Text: "Working: reading issue 12",
			Footer: "Step 3 · 12s · 1200 tokens · $0.0040",
			Buttons: []bot.Button{
				{ID: "act-pause-1", Label: "Pause"},
				{ID: "act-cancel-1", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"},
			},
		}},
		{"hostile", bot.Message{
			Kind: bot.KindApproval, Title: xss, Text: xss + "\n\n[x](javascript:alert(1))",
			Plan:    []bot.PlanLine{{Text: xss, Status: `done" onclick="alert(1)`}},
			Fields:  []bot.Field{{Name: xss, Value: xss, Code: true}, {Name: "v", Value: `" onmouseover="alert(1)`}},
			Buttons: []bot.Button{{ID: `x" onclick="alert(1)`, Label: xss, Style: `primary" onclick="x`, Confirm: `"><script>alert(1)</script>`}},
			Footer:  xss,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderMessage(tt.msg)
			checkSafeHTML(t, got)
			golden(t, tt.name, got)
		})
	}
	t.Run("rows", func(t *testing.T) {
		sent := time.Date(2026, 11, 25, 10, 4, 59, 0, time.FixedZone("X", 3600))
		got := renderRow("", sent, renderMessage(bot.Message{Kind: bot.KindAnswer, Text: "hi"})) +
			renderRow("ann.lee <admin>", sent, renderUserMessage("hello"))
		checkSafeHTML(t, got)
		golden(t, "rows", got)
	})
	t.Run("user", func(t *testing.T) {
		got := renderUserMessage("please <b>fix</b> it\njavascript:alert(1)")
		checkSafeHTML(t, got)
		golden(t, "user", got)
	})
}

func TestInitials(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"loopbot", "L"}, {"ann", "A"}, {"ann.lee", "AL"}, {"ann lee smith", "AL"},
		{"bob@example.com", "B"}, {"émile_zola", "ÉZ"}, {"<>", "<"}, {"", "?"}, {"42", "4"},
	} {
		if got := initials(tt.name); got != tt.want {
			t.Errorf("initials(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
