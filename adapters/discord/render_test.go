package discord

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", path, got)
	}
}

var renderCases = []struct {
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
	// A card's tool calls are one field.
	{"status_steps", bot.Message{
		Kind: bot.KindStatus, Title: "Working on it", Text: "Working: shell",
		Steps: []bot.Step{
			{ID: "c1", Tool: "list_files", Status: bot.StepDone, Duration: 12e6},
			{ID: "c2", Tool: "shell", Status: bot.StepFailed, Duration: 2100e6},
			{ID: "c3", Tool: "<@here>_*x*", Status: bot.StepWaiting},
		},
		EarlierSteps: 2,
		Footer:       "step 5 · 14s",
	}},
	{"status", bot.Message{
		Kind: bot.KindStatus, Title: "Summarise the open issues", Text: "Working: reading issue #12",
		Plan: []bot.PlanLine{
			{Text: "List the issues", Status: "done"}, {Text: "Read each one", Status: "in_progress"},
			{Text: "Write the summary", Status: "pending"}, {Text: "Fetch the wiki", Status: "failed"},
		},
		Footer:  "Step 4 · 1m12s · 5210 tokens · $0.0123",
		Buttons: []bot.Button{{ID: "cancelid", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
	}},
	{"approval", bot.Message{
		Kind: bot.KindApproval, Title: "Approve shell?", Text: "The run wants to call shell. Approve to run it once with exactly these arguments.",
		Fields: []bot.Field{
			{Name: "Arguments", Value: "{\n  \"command\": \"rm -rf build && echo ``` @everyone\"\n}", Code: true},
			{Name: "Risk", Value: "dangerous"},
			{Name: "Why", Value: "deletes files outside the workspace"},
		},
		Footer: "Requested by Alice's run",
		Buttons: []bot.Button{
			{ID: "approveid", Label: "Approve", Style: bot.StylePrimary, Confirm: "This call is dangerous. Run shell with these arguments?"},
			{ID: "rejectid", Label: "Reject", Style: bot.StyleDanger},
		},
	}},
	// write_file replacing a file: the diff in a code block of its own.
	{"approval_diff", bot.Message{
		Kind: bot.KindApproval, Title: "Approve write_file?", Text: "The run wants to call write_file.",
		Fields: []bot.Field{
			{Name: "Arguments", Value: "{\n  \"path\": \"report.md\",\n  \"content\": \"# Report\\nnew line\\n\"\n}", Code: true},
			{Name: "Risk", Value: "confirm"},
			{Name: "Changes", Value: "--- report.md (now)\n+++ report.md (after this call)\n@@ -1,2 +1,2 @@\n # Report\n-old ```line```\n+new <@123> line", Code: true},
		},
		Buttons: []bot.Button{{ID: "approveid", Label: "Approve", Style: bot.StylePrimary}, {ID: "rejectid", Label: "Reject", Style: bot.StyleDanger}},
	}},
	{"approval_decided", bot.Message{
		Kind: bot.KindApproval, Title: "shell: approved", Text: "Approved by Alice at 2026-03-01 12:00 UTC.",
		Fields: []bot.Field{{Name: "Arguments", Value: `{"command":"ls"}`, Code: true}, {Name: "Risk", Value: "confirm"}},
		Footer: "Requested by Alice's run",
	}},
	{"answer", bot.Message{Kind: bot.KindAnswer, Text: "There are **3** open issues. Ping <@123> or @here? No: <@&456> and @everyone stay quiet."}},
	{"answer_rated", bot.Message{Kind: bot.KindAnswer, Text: "The answer is **42**.", Buttons: []bot.Button{
		{ID: "up00000000000000000000000000000a", Label: "👍 Helpful", Feedback: bot.FeedbackUp},
		{ID: "down000000000000000000000000000b", Label: "👎 Not helpful", Feedback: bot.FeedbackDown},
	}}},
	{"answer_split", bot.Message{Kind: bot.KindAnswer, Text: strings.Repeat("Line of the answer, long enough to fill the message.\n", 50) + "\n```go\n" + strings.Repeat("fmt.Println(\"code\")\n", 60) + "```\n\nThe end."}},
	{"answer_attached", bot.Message{Kind: bot.KindAnswer, Text: strings.Repeat("A paragraph of the answer.\n\n", 400)}},
	{"failure", bot.Message{Kind: bot.KindFailure, Title: "Run failed", Text: "The model kept failing.\n\nDone: listed issues. Not done: the summary."}},
	{"question", bot.Message{
		Kind: bot.KindQuestion, Title: "The run needs you", Text: "The same call failed 3 times.",
		Footer:  "Reply in this thread with instructions, or choose:",
		Buttons: []bot.Button{{ID: "contid", Label: "Continue", Style: bot.StylePrimary}, {ID: "stopid", Label: "Stop", Style: bot.StyleDanger}},
	}},
	{"notice", bot.Message{Kind: bot.KindNotice, Text: "Your goal is queued behind the current run."}},
	{"approval_grants", bot.Message{
		Kind: bot.KindApproval, Title: "Approve shell?",
		Text: "The run wants to call shell. Approve once runs it once with exactly these arguments. Approve for this run also lets later shell calls at risk confirm or lower run without asking. Always allow here (approvers only) lets shell go test run in this channel until revoked.",
		Fields: []bot.Field{
			{Name: "Arguments", Value: "{\n  \"command\": \"go test ./...\"\n}", Code: true},
			{Name: "Risk", Value: "confirm"},
			{Name: "Always allow here covers", Value: "shell go test", Code: true},
		},
		Footer: "Run started by Alice",
		Buttons: []bot.Button{
			{ID: "onceid", Label: "Approve once", Style: bot.StylePrimary},
			{ID: "runid", Label: "Approve for this run"},
			{ID: "alwaysid", Label: "Always allow here"},
			{ID: "rejectid", Label: "Reject", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
			{ID: "rejstopid", Label: "Reject and stop", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
		},
	}},
	{"grants", bot.Message{
		Kind: bot.KindGrants, Title: "Grants in this channel",
		Text: "Calls these cover run without asking, in every run of this channel. Dangerous calls always ask.",
		Fields: []bot.Field{
			{Name: "shell go test", Value: "up to confirm, by Alice on 2026-11-27"},
			{Name: "http_fetch GET https://api.example.com", Value: "up to confirm, by Alice on 2026-11-27"},
		},
		Buttons: []bot.Button{
			{ID: "revoke1", Label: "Revoke shell go test", Style: bot.StyleDanger},
			{ID: "revoke2", Label: "Revoke http_fetch GET https://api.example.com", Style: bot.StyleDanger},
		},
	}},
	{"status_pause", bot.Message{
		Kind: bot.KindStatus, Title: "Summarise the open issues", Text: "Working: reading issue #12",
		Footer: "Step 4 · 1m12s · 5210 tokens · $0.0123",
		Buttons: []bot.Button{
			{ID: "pauseid", Label: "Pause"},
			{ID: "cancelid", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"},
		},
	}},
	{"answer_save", bot.Message{Kind: bot.KindAnswer, Text: "There are **3** open issues.",
		Buttons: []bot.Button{{ID: "act-save-1", Label: "Save as playbook"}}}},
	{"memory", bot.Message{
		Kind: bot.KindNotice, Title: "Remembered for this channel",
		Text:    "1. the staging database is db-stage-2 (ann, 2026-11-27)\n2. deploys happen on tuesdays (bob, 2026-11-27)",
		Buttons: []bot.Button{{ID: "act-forget-1", Label: "Forget 1", Style: bot.StyleDanger}, {ID: "act-forget-2", Label: "Forget 2", Style: bot.StyleDanger}},
		Footer:  "Runs in this channel are given these facts. Forget removes one.",
	}},
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			parts := render(tc.msg)
			checkLimits(t, parts)
			got, err := json.MarshalIndent(parts, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, append(got, '\n'))
		})
	}
}

// checkLimits fails the test for a message Discord would refuse or that could ping.
func checkLimits(t *testing.T, parts []outgoing) {
	t.Helper()
	for i, p := range parts {
		if n := utf8.RuneCountInString(p.Content); n > maxContent {
			t.Errorf("part %d: content %d characters", i, n)
		}
		if p.AllowedMentions == nil || p.AllowedMentions.Parse == nil || len(p.AllowedMentions.Parse) != 0 {
			t.Errorf("part %d: allowed_mentions %+v, want parse: []", i, p.AllowedMentions)
		}
		if hasPing(p.Content) {
			t.Errorf("part %d: content can ping: %q", i, p.Content)
		}
		if len(p.Embeds) > 0 {
			e := p.Embeds[0]
			total := utf8.RuneCountInString(e.Title) + utf8.RuneCountInString(e.Description)
			if utf8.RuneCountInString(e.Title) > maxTitle || utf8.RuneCountInString(e.Description) > maxDescription || len(e.Fields) > maxFields {
				t.Errorf("part %d: embed over a limit", i)
			}
			for _, f := range e.Fields {
				total += utf8.RuneCountInString(f.Name) + utf8.RuneCountInString(f.Value)
				if utf8.RuneCountInString(f.Value) > maxFieldValue || f.Value == "" || f.Name == "" {
					t.Errorf("part %d: field %q over the limit or empty", i, f.Name)
				}
			}
			if e.Footer != nil {
				total += utf8.RuneCountInString(e.Footer.Text)
			}
			if total > maxEmbedTotal {
				t.Errorf("part %d: embed %d characters in total", i, total)
			}
		}
		if len(p.Components) > maxRows {
			t.Errorf("part %d: %d rows", i, len(p.Components))
		}
		for _, row := range p.Components {
			r := row.(discordgo.ActionsRow)
			if len(r.Components) > maxButtonsInRow {
				t.Errorf("part %d: %d buttons in a row", i, len(r.Components))
			}
			for _, c := range r.Components {
				if b := c.(discordgo.Button); len(b.CustomID) > maxCustomID || b.CustomID == "" {
					t.Errorf("part %d: custom_id %q", i, b.CustomID)
				}
			}
		}
	}
}

// hasPing reports text Discord would parse as a mention.
func hasPing(s string) bool {
	return strings.Contains(s, "@everyone") || strings.Contains(s, "@here") || strings.Contains(s, "<@")
}

func TestRenderLimits(t *testing.T) {
	huge := strings.Repeat("é", 5000)
	var fields []bot.Field
	for i := range 40 {
		fields = append(fields, bot.Field{Name: fmt.Sprint("field ", i, huge), Value: huge, Code: i%2 == 0})
	}
	var buttons []bot.Button
	for i := range 30 {
		buttons = append(buttons, bot.Button{ID: fmt.Sprint("id", i), Label: huge})
	}
	buttons = append(buttons, bot.Button{ID: strings.Repeat("x", 101), Label: "too long an ID"})
	msgs := []bot.Message{
		{Kind: bot.KindStatus, Title: huge, Text: huge, Fields: fields, Footer: huge, Buttons: buttons},
		{Kind: bot.KindApproval, Title: "\n", Fields: []bot.Field{{}}, Buttons: buttons[:7]},
		{Kind: bot.KindAnswer, Text: huge + "\n" + strings.Repeat("x", 9000)},
		{Kind: bot.KindFailure, Text: strings.Repeat("@everyone <@1> ", 500)},
		{Kind: bot.KindNotice},
	}
	for i, m := range msgs {
		parts := render(m)
		checkLimits(t, parts)
		one := renderOne(m)
		checkLimits(t, []outgoing{one})
		if i == 0 {
			rows := parts[0].Components
			if len(rows) != maxRows || len(rows[maxRows-1].(discordgo.ActionsRow).Components) != maxButtonsInRow {
				t.Errorf("want 25 buttons in 5 full rows, got %d rows", len(rows))
			}
		}
	}
}

func FuzzRender(f *testing.F) {
	f.Add("title", "text with <@1> and @everyone\n\n```\ncode", "footer", 3000)
	f.Add("", "", "", 0)
	f.Fuzz(func(t *testing.T, title, text, footer string, n int) {
		if n < 0 || n > 20000 {
			n = 0
		}
		text += strings.Repeat("ab\n", n/3)
		for _, kind := range []bot.MessageKind{bot.KindStatus, bot.KindApproval, bot.KindAnswer, bot.KindQuestion} {
			m := bot.Message{Kind: kind, Title: title, Text: text, Footer: footer, Fields: []bot.Field{{Name: title, Value: text, Code: true}}, Plan: []bot.PlanLine{{Text: text}}}
			checkLimits(t, render(m))
		}
	})
}

func TestMarkdown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"There are **3** _open_ ~~closed~~ issues: `x` [docs](https://e.com)", "There are **3** _open_ ~~closed~~ issues: `x` [docs](https://e.com)"},
		{"# One\n### Three\n#### Four **b**", "# One\n### Three\n**Four b**"},
		{"~~~py\nprint(1)\n~~~", "```py\nprint(1)\n```"},
		{"```go\nopen", "```go\nopen\n```"},
		{"- a\n  more\n2) b\n> q", "- a\n  more\n2) b\n> q"},
		{"a\r\n\r\nb\n", "a\n\nb\n"},
		{"[x]( https://e.com )", "[x](https://e.com)"},
	}
	for _, tt := range tests {
		if got := markdown(tt.in); got != tt.want {
			t.Errorf("markdown(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
