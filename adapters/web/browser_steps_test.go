package web_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
)

// TestBrowserStepsDiffAndFiles walks a run of the real file tools in the browser: a
// list_files step the reader opens (it stays open while the card changes), a write_file
// approved with "a", a second write to the same file whose card shows the diff, rejected
// with "r", and the answer's link to the file, which serves the file as written. Screenshots
// of the step, the diff and the link go to screenshots(t).
func TestBrowserStepsDiffAndFiles(t *testing.T) {
	ctx := browser(t)
	shots := screenshots(t)
	dir := t.TempDir()
	ws, err := tools.NewWorkspaces(filepath.Join(dir, "ws"), tools.LimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	files := tools.FilesConfig{Enabled: true}
	set := []agent.Tool{tools.NewListFiles(ws, files), tools.NewWriteFile(ws, files)}
	const v1 = "# Report\n\nThe site is up.\nChecked: home, docs.\n"
	const v2 = "# Report\n\nThe site is down.\nChecked: home, docs.\nNext: <b>page</b> the on-call.\n"
	write := func(id, content string) llmtest.Step {
		args, _ := json.Marshal(map[string]string{"path": "docs/report.md", "content": content})
		return llmtest.ToolCalls(llmtest.ToolCall{ID: id, Name: "write_file", Arguments: string(args)})
	}
	model := llmtest.NewTest(t,
		llmtest.ToolCalls(llmtest.ToolCall{ID: "call_list", Name: "list_files", Arguments: `{"path":"."}`}),
		write("call_w1", v1),
		write("call_w2", v2),
		llmtest.Text("Done: the report is written."),
	)
	acfg := agent.Config{MaxSteps: 10, RiskFloor: map[string]agent.Risk{"write_file": agent.RiskConfirm}}
	view := web.WithWorkspaces(ws.Path)
	d := serveWith(t, filepath.Join(dir, "bot.db"), "127.0.0.1:0", model, set, acfg, bot.Config{}, web.Config{}, view)
	d.start(t)

	const status, approval = "#messages .msg-status", "#messages .msg-approval"
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		login(d.srv.URL, "", "", "you"),
		chromedp.SendKeys(chromedp.CSS("#goal"), "check the site and write a report"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		chromedp.WaitVisible(chromedp.CSS(approveButton)),
		textIn(status+" .step-done", "list_files"),
		// The reader opens the list_files step.
		chromedp.Click(chromedp.CSS(status+` details[data-step="call_list"] summary`)),
		textIn(status+` details[data-step="call_list"][open]`, "path: ."),
	); err != nil {
		t.Fatalf("browser, up to the first write: %v", err)
	}
	step := text(t, ctx, status+` details[data-step="call_list"]`)
	for _, want := range []string{"list_files", "done", "Arguments", "path: .", "Result"} {
		if !strings.Contains(step, want) {
			t.Errorf("the open step says %q, want %q in it", step, want)
		}
	}
	if !strings.Contains(step, " ms") && !strings.Contains(step, " s") {
		t.Errorf("the step %q does not say how long it took", step)
	}
	shoot(t, ctx, shots, "5-step-open")

	// "a" approves the first write: the status card changes, the open step stays open.
	if err := chromedp.Do(ctx,
		chromedp.Blur(chromedp.CSS("#reply")),
		chromedp.KeyEvent("a"),
		textIn(approval+" .diff", "-The site is up."),
		textIn(status+" .step-waiting", "write_file"),
	); err != nil {
		t.Fatalf("browser, approve the first write from the keyboard: %v", err)
	}
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#messages .msg-status details[data-step="call_list"]').open`))
	if err != nil {
		t.Fatal(err)
	}
	if !open {
		t.Error("the step the reader opened closed when the card changed")
	}
	// With the diff on the card, the new content is folded, a click away.
	folded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#messages .msg-approval')].map(c => { const d = c.querySelector('details.arg-fold'); return d ? (d.open ? 'open' : 'folded') : 'shown'; }).join(',')`))
	if err != nil {
		t.Fatal(err)
	}
	if folded != "shown,folded" {
		t.Errorf("the approval cards' content: %q, want shown on the new file's card and folded on the diff's", folded)
	}
	diff := text(t, ctx, approval+" .diff")
	for _, want := range []string{"--- docs/report.md (now)", "-The site is up.", "+The site is down.", "+Next: <b>page</b> the on-call."} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff shows\n%s\nwant %q in it", diff, want)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector('#messages .msg-approval .diff').scrollIntoView({ block: 'center' });
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	shoot(t, ctx, shots, "6-diff-approval")

	// "r" rejects the second write; the answer links the file the run wrote.
	if err := chromedp.Do(ctx,
		chromedp.KeyEvent("r"),
		textIn(approval, "Rejected by you"),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-answer .msg-files a")),
		textIn(status+" .step-rejected", "write_file"),
	); err != nil {
		t.Fatalf("browser, reject from the keyboard: %v", err)
	}
	shoot(t, ctx, shots, "7-files-link")
	type link struct{ Text, Href, Body string }
	got, err := chromedp.Run(ctx, chromedp.Evaluate[link](`(async () => {
		const a = document.querySelector('#messages .msg-answer .msg-files a');
		const res = await fetch(a.href, { credentials: 'same-origin' });
		return { Text: a.textContent, Href: a.getAttribute('href'), Body: res.ok ? await res.text() : String(res.status) };
	})()`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "docs/report.md" || !strings.HasPrefix(got.Href, "/files/") || got.Body != v1 {
		t.Errorf("the answer links %q at %q, which serves %q; want docs/report.md as first written", got.Text, got.Href, got.Body)
	}
	noScriptRan(t, ctx)
}

// TestBrowserShortcutsFocusedCard: with two calls waiting, "a" pressed while the focus is
// on the first card (its Reject button, tabbed to) approves that card's call, not the
// latest; "r" with the focus outside any card rejects the latest pending one.
func TestBrowserShortcutsFocusedCard(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t,
		llmtest.ToolCalls(
			llmtest.ToolCall{ID: "call_one", Name: "deploy", Arguments: `{"version":"one"}`},
			llmtest.ToolCall{ID: "call_two", Name: "deploy", Arguments: `{"version":"two"}`},
		),
		llmtest.Text("Deployed one; two was rejected."),
	)
	d := serveWith(t, filepath.Join(t.TempDir(), "bot.db"), "127.0.0.1:0", model, []agent.Tool{tool}, agent.Config{MaxSteps: 10}, bot.Config{}, web.Config{})
	d.start(t)
	const first = "#messages .entry:nth-child(3) .msg-approval"
	if err := chromedp.Do(ctx,
		login(d.srv.URL, "", "", "you"),
		chromedp.SendKeys(chromedp.CSS("#goal"), "deploy both"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		textIn("#messages .msg-approval", "two"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#messages .msg-approval button.btn-primary:not([disabled])').length === 2`),
		textIn(first, "one"),
		chromedp.Focus(chromedp.CSS(first+" button.btn-danger")),
		chromedp.KeyEvent("a"),
		textIn(first, "Approved by you"),
	); err != nil {
		t.Fatalf("browser, approve the focused card: %v", err)
	}
	pending, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#messages .msg-approval')].filter(c => c.querySelector('button.btn-primary')).map(c => c.textContent.includes('two') ? 'two' : 'one').join(',')`))
	if err != nil {
		t.Fatal(err)
	}
	if pending != "two" {
		t.Fatalf("after a on the first card, the cards still pending are %q, want two", pending)
	}
	if err := chromedp.Do(ctx,
		chromedp.Blur(chromedp.CSS("#reply")),
		chromedp.KeyEvent("r"),
		textIn("#messages .msg-approval", "Rejected by you"),
		textIn("#messages .msg-answer", "two was rejected"),
	); err != nil {
		t.Fatalf("browser, reject the latest from the keyboard: %v", err)
	}
	if n := tool.count(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
}
