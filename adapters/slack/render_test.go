package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func approvalButtons() []bot.Button {
	return []bot.Button{
		{ID: "k3v7q2mfx5d4oy6n2bqz1w8r0tj9hsae", Label: "Approve", Style: bot.StylePrimary},
		{ID: "p0c4zt8w2nq6yr1mdx9b3kf7sv5hlgje", Label: "Reject", Style: bot.StyleDanger, Confirm: "Reject this call? The run continues without it."},
	}
}

// goldenMessages are one message of each kind, plus the edge cases of escaping and length.
var goldenMessages = map[string]bot.Message{
	"status_plan": {
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
	},
	// A card's tool calls are one context line.
	"status_steps": {
		Kind: bot.KindStatus, Title: "Working on it", Text: "Working: shell",
		Steps: []bot.Step{
			{ID: "c1", Tool: "list_files", Status: bot.StepDone, Duration: 12e6},
			{ID: "c2", Tool: "shell", Status: bot.StepFailed, Duration: 2100e6},
			{ID: "c3", Tool: "<@here>_*x*", Status: bot.StepWaiting},
		},
		EarlierSteps: 2,
		Footer:       "step 5 · 14s",
	},
	"status": {
		Kind: bot.KindStatus, Title: "Working on it",
		Text: "Summarise the open issues in **loopbot/loopbot** and draft a release note",
		Plan: []bot.PlanLine{
			{Text: "List open issues", Status: "done"},
			{Text: "Group them by area", Status: "in_progress"},
			{Text: "Draft the note", Status: "pending"},
			{Text: "Fetch the milestone", Status: "failed"},
		},
		Fields:  []bot.Field{{Name: "Step", Value: "4 of 30"}, {Name: "Elapsed", Value: "1m12s"}},
		Footer:  "step 4 · 1m12s · 12,480 tokens · $0.031",
		Buttons: []bot.Button{{ID: "c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
	},
	"approval": {
		Kind: bot.KindApproval, Title: "Approval needed: shell",
		Text: "The model wants to run a command that changes files.\n*Why:* clean the build cache before the rebuild.",
		Fields: []bot.Field{
			{Name: "command", Value: "rm -rf ./build && make ```all```", Code: true},
			{Name: "Risk", Value: "dangerous"},
			{Name: "Requested by", Value: "ann"},
		},
		Footer:  "Expires at 14:30 UTC",
		Buttons: approvalButtons(),
	},
	"approval_grants": {
		Kind: bot.KindApproval, Title: "Approve shell?",
		Text: "The run wants to call shell. Approve once runs it once with exactly these arguments. Approve for this run also lets later shell calls at risk confirm or lower run without asking. Always allow here (approvers only) lets shell go test run in this channel until revoked.",
		Fields: []bot.Field{
			{Name: "Arguments", Value: "{\n  \"command\": \"go test ./...\"\n}", Code: true},
			{Name: "Risk", Value: "confirm"},
			{Name: "Always allow here covers", Value: "shell go test", Code: true},
		},
		Footer: "Run started by ann",
		Buttons: []bot.Button{
			{ID: "once0000000000000000000000000000", Label: "Approve once", Style: bot.StylePrimary},
			{ID: "run00000000000000000000000000000", Label: "Approve for this run"},
			{ID: "always00000000000000000000000000", Label: "Always allow here"},
			{ID: "reject00000000000000000000000000", Label: "Reject", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
			{ID: "rejstop0000000000000000000000000", Label: "Reject and stop", Style: bot.StyleDanger, Reason: bot.ReasonLabel},
		},
	},
	"grants": {
		Kind: bot.KindGrants, Title: "Grants in this channel",
		Text: "Calls these cover run without asking, in every run of this channel. Dangerous calls always ask.",
		Fields: []bot.Field{
			{Name: "shell go test", Value: "up to confirm, by boss on 2026-11-27"},
			{Name: "http_fetch GET https://api.example.com", Value: "up to confirm, by boss on 2026-11-27"},
		},
		Buttons: []bot.Button{
			{ID: "revoke1000000000000000000000000", Label: "Revoke shell go test", Style: bot.StyleDanger},
			{ID: "revoke2000000000000000000000000", Label: "Revoke http_fetch GET https://api.example.com", Style: bot.StyleDanger},
		},
	},
	"status_pause": {
		Kind: bot.KindStatus, Title: "Working on it", Text: "Working: shell",
		Footer: "Step 4 · 1m12s · 12480 tokens · $0.0310",
		Buttons: []bot.Button{
			{ID: "pause000000000000000000000000000", Label: "Pause"},
			{ID: "c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"},
		},
	},
	// write_file replacing a file: the diff in a code block of its own.
	"approval_diff": {
		Kind: bot.KindApproval, Title: "Approve write_file?",
		Text: "The run wants to call write_file.",
		Fields: []bot.Field{
			{Name: "Arguments", Value: "{\n  \"path\": \"report.md\",\n  \"content\": \"# Report\\nnew line\\n\"\n}", Code: true},
			{Name: "Risk", Value: "confirm"},
			{Name: "Changes", Value: "--- report.md (now)\n+++ report.md (after this call)\n@@ -1,2 +1,2 @@\n # Report\n-old ```line```\n+new <@123> line", Code: true},
		},
		Buttons: approvalButtons(),
	},
	"approval_decided": {
		Kind: bot.KindApproval, Title: "Approval needed: shell",
		Text:   "The model wants to run a command that changes files.",
		Fields: []bot.Field{{Name: "command", Value: "rm -rf ./build", Code: true}},
		Footer: "Approved by bea at 2026-01-02 14:05 UTC",
	},
	"answer": {
		Kind:   bot.KindAnswer,
		Text:   "## Summary\nThere are **3** open issues:\n- #12 flaky test\n- #14 docs\n\nSee [the tracker](https://github.com/loopbot/loopbot/issues?q=is:open&sort=new) or run `go test ./...`:\n```go\nif a < b && b > c {\n}\n```",
		Footer: "7 steps · 2m03s · $0.04",
	},
	// An answer with its rating buttons: plain buttons, or with Slack's agent features
	// (goldenAssistant) Slack's feedback buttons.
	"answer_rated": {
		Kind: bot.KindAnswer,
		Text: "The answer is **42**.",
		Buttons: []bot.Button{
			{ID: "up00000000000000000000000000000a", Label: "👍 Helpful", Feedback: bot.FeedbackUp},
			{ID: "down000000000000000000000000000b", Label: "👎 Not helpful", Feedback: bot.FeedbackDown},
		},
	},
	"failure": {
		Kind: bot.KindFailure, Title: "Run failed",
		Text:   "The budget of 30 steps ran out.\nDone: listed issues. Not done: the release note.",
		Footer: "30 steps · 9m58s",
	},
	"question": {
		Kind: bot.KindQuestion,
		Text: "Which branch should I compare against: `main` or `release-1.2`?",
	},
	"paused": {
		Kind: bot.KindQuestion, Title: "Paused: the same call failed 3 times",
		Text: "`http_fetch` keeps timing out on https://example.com.",
		Buttons: []bot.Button{
			{ID: "cont0000000000000000000000000000", Label: "Continue", Style: bot.StylePrimary},
			{ID: "stop0000000000000000000000000000", Label: "Stop", Style: bot.StyleDanger},
		},
	},
	"answer_save": {Kind: bot.KindAnswer, Text: "There are *3* open issues.",
		Buttons: []bot.Button{{ID: "act-save-1", Label: "Save as playbook"}}},
	"memory": {
		Kind: bot.KindNotice, Title: "Remembered for this channel",
		Text:    "1. the staging database is db-stage-2 (ann, 2026-11-27)\n2. deploys happen on tuesdays (bob, 2026-11-27)",
		Buttons: []bot.Button{{ID: "act-forget-1", Label: "Forget 1", Style: bot.StyleDanger}, {ID: "act-forget-2", Label: "Forget 2", Style: bot.StyleDanger}},
		Footer:  "Runs in this channel are given these facts. Forget removes one.",
	},
	"notice": {
		Kind: bot.KindNotice,
		Text: "Queued ann's request; it starts when the current run in this thread ends (1 waiting).",
	},
	"escaped": {
		Kind:  bot.KindAnswer,
		Title: "Hi <!channel> @here",
		Text:  "Ping @channel and @here and <!everyone> and <!here|here> and <@U024BE7LH> and <#C123|general>.\nAlso <https://evil.example|click> & [x](javascript:alert(1)) and [ok](https://ok.example/a?b=1&c=2).",
	},
	"answer_10k": {
		Kind: bot.KindAnswer,
		Text: strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit & <more>. ", 150) + // 10,050
			"\n```\n" + strings.Repeat("code line < 80 chars\n", 60) + "```\nThe end.",
	},
}

// goldenAssistant are the messages also rendered for an app with Slack's agent features,
// into name_assistant.golden.
var goldenAssistant = []string{"answer_rated", "status"}

func TestGolden(t *testing.T) {
	type goldenCase struct {
		m         bot.Message
		assistant bool
	}
	all := map[string]goldenCase{}
	for name, m := range goldenMessages {
		all[name] = goldenCase{m, false}
	}
	for _, name := range goldenAssistant {
		all[name+"_assistant"] = goldenCase{goldenMessages[name], true}
	}
	for name, g := range all {
		t.Run(name, func(t *testing.T) {
			parts, err := render(g.m, false, g.assistant)
			if err != nil {
				t.Fatal(err)
			}
			checkLimits(t, parts)
			got, err := json.MarshalIndent(parts, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, string(got)+"\n")
		})
	}
}

// golden compares got with testdata/name.golden, or rewrites the file under -update.
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
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("%s differs from the rendering; run go test -update and review the diff:\n%s", path, got)
	}
}

// TestEscaped checks what the golden file shows: no text of the model or the bot can
// mention anyone, broadcast or link somewhere other than an http(s) URL.
func TestEscaped(t *testing.T) {
	parts, err := render(goldenMessages["escaped"], false, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(parts)
	s := string(b)
	for _, bad := range []string{"<!", "<@", "<#", "@channel", "@here", "<https://evil", "javascript:alert(1)|"} {
		if strings.Contains(s, bad) || strings.Contains(s, strings.ReplaceAll(bad, "<", `\u003c`)) {
			t.Errorf("rendering contains %q: %s", bad, s)
		}
	}
	if !strings.Contains(s, `\u003chttps://ok.example/a?b=1\u0026amp;c=2|ok\u003e`) {
		t.Errorf("the https link was not kept: %s", s)
	}
}

func TestLongAnswerSplits(t *testing.T) {
	parts, err := render(goldenMessages["answer_10k"], false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("%d messages, want 1 holding several sections", len(parts))
	}
	sections := 0
	for _, b := range parts[0].Blocks {
		if s, ok := b.(*slack.SectionBlock); ok {
			sections++
			if strings.Count(s.Text.Text, "```")%2 != 0 {
				t.Errorf("section with an unbalanced code fence: %q", s.Text.Text)
			}
		}
	}
	if sections < 4 {
		t.Errorf("%d sections for 11k characters", sections)
	}
	// Status cards are edited in place, so they never split: too much text is cut.
	long := goldenMessages["status"]
	long.Text = strings.Repeat("x ", 60000)
	parts, err = render(long, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("status card in %d messages", len(parts))
	}
	checkLimits(t, parts)
}

// checkLimits fails the test if any part breaks one of Slack's limits.
func checkLimits(t testing.TB, parts []payload) {
	t.Helper()
	if len(parts) == 0 {
		t.Fatal("no message")
	}
	for i, p := range parts {
		if p.Text == "" || runeLen(p.Text) > maxMessageText {
			t.Errorf("part %d: fallback text of %d characters", i, runeLen(p.Text))
		}
		if len(p.Blocks) > maxBlocks {
			t.Errorf("part %d: %d blocks", i, len(p.Blocks))
		}
		for _, b := range p.Blocks {
			switch b := b.(type) {
			case *slack.HeaderBlock:
				textLimit(t, "header", b.Text, maxHeaderText)
			case *slack.SectionBlock:
				if b.Text != nil {
					textLimit(t, "section", b.Text, maxSectionText)
				}
				if len(b.Fields) > maxSectionFields {
					t.Errorf("section with %d fields", len(b.Fields))
				}
				for _, f := range b.Fields {
					textLimit(t, "field", f, maxFieldText)
				}
			case *slack.ContextBlock:
				for _, e := range b.ContextElements.Elements {
					if tx, ok := e.(*slack.TextBlockObject); ok {
						textLimit(t, "context", tx, maxContextText)
					}
				}
			case *slack.ActionBlock:
				if len(b.Elements.ElementSet) > maxActionButtons {
					t.Errorf("%d buttons", len(b.Elements.ElementSet))
				}
				for _, e := range b.Elements.ElementSet {
					btn := e.(*slack.ButtonBlockElement)
					textLimit(t, "button", btn.Text, maxButtonText)
					if len(btn.ActionID) > maxActionID || !strings.HasPrefix(btn.ActionID, actionPrefix) {
						t.Errorf("action_id %q", btn.ActionID)
					}
					if btn.Value == "" || len(btn.Value) > maxButtonValue {
						t.Errorf("button value of %d bytes", len(btn.Value))
					}
					if c := btn.Confirm; c != nil {
						textLimit(t, "confirm title", c.Title, maxConfirmTitle)
						textLimit(t, "confirm text", c.Text, maxConfirmText)
						textLimit(t, "confirm button", c.Confirm, maxConfirmButton)
					}
				}
			case *slack.ContextActionsBlock:
				for _, e := range b.Elements.ElementSet {
					fb := e.(*slack.FeedbackButtonsBlockElement)
					if !strings.HasPrefix(fb.ActionID, actionPrefix) {
						t.Errorf("feedback action_id %q", fb.ActionID)
					}
					for _, btn := range []*slack.FeedbackButton{fb.PositiveButton, fb.NegativeButton} {
						textLimit(t, "feedback button", btn.Text, maxButtonText)
						if btn.Value == "" || len(btn.Value) > maxButtonValue {
							t.Errorf("feedback button value of %d bytes", len(btn.Value))
						}
					}
				}
			default:
				t.Errorf("unexpected block %T", b)
			}
		}
	}
}

func textLimit(t testing.TB, what string, o *slack.TextBlockObject, n int) {
	t.Helper()
	if o == nil || strings.TrimSpace(o.Text) == "" {
		t.Errorf("%s: empty text", what)
		return
	}
	if runeLen(o.Text) > n {
		t.Errorf("%s: %d characters, limit %d", what, runeLen(o.Text), n)
	}
	if unsafeMarkup.MatchString(o.Text) {
		t.Errorf("%s: mention or broadcast markup in %q", what, o.Text)
	}
}

// unsafeMarkup is mrkdwn that pings someone: user, group and special mentions.
var unsafeMarkup = regexp.MustCompile(`<[!@#]|(?i)@(channel|here|everyone)\b`)

func TestMrkdwn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a & b < c > d", "a &amp; b &lt; c &gt; d"},
		{"**bold** and *it* and ~~gone~~", "*bold* and _it_ and ~gone~"},
		{"# Title\n## **Sub**", "*Title*\n*Sub*"},
		{"- one\n  * two\n+ three", "• one\n  • two\n• three"},
		{"[site](https://x.example/?a=1&b=2)", "<https://x.example/?a=1&amp;b=2|site>"},
		{"[bad](ftp://x) [js](javascript:x)", "[bad](ftp://x) [js](javascript:x)"},
		{"`<@U1> **no**`", "`&lt;@U1&gt; **no**`"},
		{"```go\n<b>\n```", "```\n&lt;b&gt;\n```"},
		{"```\nunclosed", "```\nunclosed\n```"},
		{"@here @Channel @everyone", "@\u2060here @\u2060Channel @\u2060everyone"},
		{"odd ` tick", "odd ` tick"},
		{"a\r\nb", "a\nb"},
		{"_em_ and snake_case_name", "_em_ and snake_case_name"},
		{"~~~\ncode\n~~~", "```\ncode\n```"},
		{"> quoted\n1. first", "&gt; quoted\n1. first"},
		{`\*not bold\*`, `\*not bold\*`},
		{"[**b** <x>](https://x.example)", "<https://x.example|*b* &lt;x&gt;>"},
		{"[a](https://x.example/<@U1>)", "[a](https://x.example/&lt;@U1&gt;)"},
		{"#### **All** bold", "*All bold*"},
	}
	for _, tc := range tests {
		if got := mrkdwn(tc.in); got != tc.want {
			t.Errorf("mrkdwn(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClipMrkdwn(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"one two three four", 12, "one\n…"},
		{"a &amp; b", 7, "a\n…"},
		{strings.Repeat(" ", 50), 10, ""},
	}
	for _, tt := range tests {
		if got := clipMrkdwn(tt.in, tt.n); got != tt.want {
			t.Errorf("clipMrkdwn(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	// A field of white space longer than a field renders.
	if _, err := render(bot.Message{Kind: bot.KindAnswer, Fields: []bot.Field{{Name: "n", Value: strings.Repeat(" ", 3000)}}}, false, false); err != nil {
		t.Fatal(err)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
	}{
		{"entities", strings.Repeat("&amp;", 100), 23},
		{"link", "see " + strings.Repeat("w ", 10) + "<https://example.com/very/long/path|the link text> after", 60},
		{"fence", "```\n" + strings.Repeat("line\n", 30) + "```", 40},
		{"no spaces", strings.Repeat("x", 95), 20},
		{"unicode", strings.Repeat("ü日本🙂 ", 40), 17},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := split(tc.in, tc.n)
			var joined strings.Builder
			for _, c := range chunks {
				if runeLen(c) > tc.n {
					t.Errorf("chunk of %d > %d: %q", runeLen(c), tc.n, c)
				}
				if strings.Count(c, "```")%2 != 0 {
					t.Errorf("unbalanced fence in %q", c)
				}
				if i, j := strings.LastIndex(c, "&"), strings.LastIndex(c, ";"); i > j {
					t.Errorf("cut entity in %q", c)
				}
				if i, j := strings.LastIndex(c, "<"), strings.LastIndex(c, ">"); i > j {
					t.Errorf("cut link in %q", c)
				}
				joined.WriteString(strings.ReplaceAll(c, "```", ""))
			}
			strip := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "```", "")), "") }
			if strip(joined.String()) != strip(tc.in) {
				t.Errorf("text lost or changed:\n got %q\nwant %q", joined.String(), tc.in)
			}
		})
	}
}

// FuzzRender: any message renders within every Slack limit, without mention markup, or is
// refused for its buttons.
func FuzzRender(f *testing.F) {
	f.Add("Title", "**text** <@U1> [a](https://b)", "plan", "field", "v", "foot", "id", "label", 1)
	f.Add("", strings.Repeat("```\n<&>", 3000), "", "", "", "", "", "", 40)
	f.Fuzz(func(t *testing.T, title, text, plan, fname, fvalue, footer, id, label string, n int) {
		n = max(0, min(n, 60))
		m := bot.Message{Kind: bot.KindAnswer, Title: title, Text: strings.Repeat(text, n%7+1), Footer: footer}
		for i := range n {
			m.Plan = append(m.Plan, bot.PlanLine{Text: plan, Status: []string{"done", "pending", "x"}[i%3]})
			m.Fields = append(m.Fields, bot.Field{Name: fname, Value: fvalue, Code: i%2 == 0})
		}
		if id != "" {
			m.Buttons = []bot.Button{{ID: id, Label: label, Confirm: text}}
		}
		for _, kind := range []bot.MessageKind{bot.KindAnswer, bot.KindStatus} {
			m.Kind = kind
			parts, err := render(m, false, false)
			if err != nil {
				if !strings.Contains(err.Error(), errBadButton.Error()) {
					t.Fatal(err)
				}
				return
			}
			checkLimits(t, parts)
		}
	})
}

// TestFeedbackBlockNeedsBoth: Slack's feedback buttons element has a positive and a negative
// button; a message with only one rating button, or an ID too long for a value, keeps plain
// buttons.
func TestFeedbackBlockNeedsBoth(t *testing.T) {
	up := bot.Button{ID: "up00000000000000000000000000000a", Label: "👍 Helpful", Feedback: bot.FeedbackUp}
	down := bot.Button{ID: strings.Repeat("d", maxButtonValue+1), Label: "👎 Not helpful", Feedback: bot.FeedbackDown}
	for name, buttons := range map[string][]bot.Button{
		"only up":         {up},
		"long down":       {up, down},
		"no rating":       {{ID: "x", Label: "Cancel"}},
		"two up, no down": {up, up},
	} {
		block, rest := feedbackBlock(buttons)
		if block != nil || len(rest) != len(buttons) {
			t.Errorf("%s: block %v, %d buttons left of %d", name, block, len(rest), len(buttons))
		}
	}
}
