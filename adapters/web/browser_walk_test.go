package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// The walk: the demo's run played in the browser against the real bot. A tool fails and
// the run asks the person whether to go on (a question card with Continue and Stop); after
// Continue it wants to write a file (an approval card that shows the file); after Approve
// it answers, quoting the goal. Then loopbot restarts, and the page finds the same thread.

// reportContent is the file the run writes.
const reportContent = "# Demo report\n\nGoal: deploy the site\n\nWritten by <b>loopbot</b>.\n"

// writeFile stands for the workspace's write_file: it needs an approval.
type writeFile struct{ deploy }

func (w *writeFile) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "write_file", Description: "writes a file",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)}}
}

func (w *writeFile) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "writes a file"}
}

func (w *writeFile) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	w.deploy.Call(ctx, inv)
	return "wrote report.md", nil
}

// flaky is a tool that always fails, so the run pauses and asks.
type flaky struct{}

func (flaky) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "list_files", Description: "lists files",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
}

func (flaky) Assess(json.RawMessage) agent.Assessment { return agent.Assessment{Risk: agent.RiskSafe} }

func (flaky) Call(context.Context, agent.Invocation) (string, error) {
	return "", errors.New("the workspace is not mounted")
}

func walkScript() []llmtest.Step {
	args, _ := json.Marshal(map[string]string{"path": "report.md", "content": reportContent})
	return []llmtest.Step{
		llmtest.ToolCalls(llmtest.ToolCall{ID: "call_list", Name: "list_files", Arguments: `{"path":"."}`}),
		llmtest.ToolCalls(llmtest.ToolCall{ID: "call_write", Name: "write_file", Arguments: string(args)}),
		llmtest.Text("Done. I wrote **report.md** with a short report on your goal:\n\n> deploy the site\n\n(A scripted model played this run.)"),
	}
}

// screenshots is where the test saves its screenshots for review: $LOOPBOT_SCREENSHOTS if
// set (kept), else the test's temporary directory.
func screenshots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOOPBOT_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shoot saves the tab's viewport as dir/name.png.
func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	// The page draws what changed at its next frames; a capture before them shows the
	// page as it was.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// pageView is what the page shows of the thread: the titles in the sidebar, the thread's
// title, and each message as its ID, kind and text.
type pageView struct {
	Threads  []string `json:"threads"`
	Title    string   `json:"title"`
	Messages []string `json:"messages"`
}

const pageViewJS = `({
	threads: [...document.querySelectorAll('#threads a')].map(a => a.textContent),
	title: document.getElementById('thread-title').textContent,
	messages: [...document.querySelectorAll('#messages .entry')].map(e =>
		e.dataset.id + ' ' + e.dataset.kind + ' ' + e.querySelector('.bubble').textContent.replace(/\s+/g, ' ').trim()),
})`

func readView(t *testing.T, ctx context.Context) pageView {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](pageViewJS))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// layout is the geometry the chat layout promises, measured in the page.
type layout struct {
	Width, Height float64
	// Right is where the rightmost message, and the reply box, end.
	MessagesRight, ReplyRight float64
	// ReplyBottom is where the reply box ends: the bottom of the window, pinned.
	ReplyBottom float64
	// Rows counts messages with an avatar and a time.
	Rows, Avatars, Times int
}

const layoutJS = `(() => {
	const right = (sel) => Math.max(0, ...[...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().right));
	const reply = document.getElementById('reply-form').getBoundingClientRect();
	return {
		Width: window.innerWidth, Height: window.innerHeight,
		MessagesRight: right('#messages .msg'), ReplyRight: reply.right, ReplyBottom: reply.bottom,
		Rows: document.querySelectorAll('#messages .row-chat').length,
		Avatars: [...document.querySelectorAll('#messages .row-chat .avatar')].filter(a => a.textContent.trim() !== '').length,
		Times: document.querySelectorAll('#messages .row-chat .meta time').length,
	};
})()`

// checkLayout fails if the thread's page leaves the right third of the window empty, does
// not keep the reply box at the bottom of the window, or shows a message without its
// avatar and time.
func checkLayout(t *testing.T, ctx context.Context) {
	t.Helper()
	l, err := chromedp.Run(ctx, chromedp.Evaluate[layout](layoutJS))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layout at %gx%g: messages end at %g, reply box at %g (bottom %g)", l.Width, l.Height, l.MessagesRight, l.ReplyRight, l.ReplyBottom)
	// Not only no empty third: the messages and the reply box use the width, up to the
	// page's margin, so no band of any size is left on the right.
	if l.MessagesRight < l.Width*0.95 || l.ReplyRight < l.Width*0.95 {
		t.Errorf("at %g px wide the messages end at %g px and the reply box at %g px: the right of the window is left empty", l.Width, l.MessagesRight, l.ReplyRight)
	}
	if l.ReplyBottom < l.Height-2 || l.ReplyBottom > l.Height+1 {
		t.Errorf("the reply box ends at %g px in a window %g px high: it is not pinned to the bottom", l.ReplyBottom, l.Height)
	}
	if l.Rows == 0 || l.Avatars != l.Rows || l.Times != l.Rows {
		t.Errorf("%d chat rows, %d with an avatar, %d with a time", l.Rows, l.Avatars, l.Times)
	}
}

// TestBrowserWalkAcrossRestart walks the demo's run, restarts loopbot (the same database
// and console history, a new process), reloads the page and finds the same thread: its
// title, its messages in their order with the goal first, the question and the approval
// decided. Screenshots of the main states go to screenshots(t).
func TestBrowserWalkAcrossRestart(t *testing.T) {
	ctx := browser(t)
	shots := screenshots(t)
	write := &writeFile{}
	model := llmtest.NewTest(t, walkScript()...)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "bot.db")
	history := web.WithHistory(dbPath+".console", 0)
	tools := []agent.Tool{flaky{}, write}
	acfg := agent.Config{MaxSteps: 10, MaxConsecutiveFailures: 1}

	first := serveWith(t, dbPath, "127.0.0.1:0", model, tools, acfg, bot.Config{}, web.Config{}, history)
	first.start(t)
	url, addr := first.srv.URL, first.addr()

	const question = "#messages .msg-question"
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		login(url, "", "", "you"),
		chromedp.SendKeys(chromedp.CSS("#goal"), "deploy the site"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		chromedp.WaitVisible(chromedp.CSS(question+" button.btn-primary")),
		textIn("#messages .msg-status", "Waiting for a reply"),
	); err != nil {
		t.Fatalf("browser, up to the question: %v", err)
	}
	// The question's lead line introduces its buttons: it comes before them.
	leadFirst, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const q = document.querySelector('#messages .msg-question');
		const lead = q.querySelector('.msg-lead'), buttons = q.querySelector('.buttons');
		return !!lead && !!buttons && lead.textContent.endsWith('choose:') &&
			!!(lead.compareDocumentPosition(buttons) & Node.DOCUMENT_POSITION_FOLLOWING);
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !leadFirst {
		t.Error(`the question's "...or choose:" line is not above its buttons`)
	}
	checkLayout(t, ctx)
	shoot(t, ctx, shots, "1-question")

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(question+" button.btn-primary")),
		chromedp.WaitVisible(chromedp.CSS(approveButton)),
		textIn(question, "Continue: chosen by you"),
		textIn("#messages .msg-approval .arg-file", "# Demo report"),
	); err != nil {
		t.Fatalf("browser, continue: %v", err)
	}
	shoot(t, ctx, shots, "2-approval")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(approveButton)),
		textIn("#messages .msg-approval", "Approved by you"),
		textIn("#messages .msg-answer blockquote", "deploy the site"),
		textIn("#messages .msg-status", "Done"),
	); err != nil {
		t.Fatalf("browser, approve: %v", err)
	}
	shoot(t, ctx, shots, "3-done")
	checkLayout(t, ctx)
	// A wide screen too.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, ctx)
	shoot(t, ctx, shots, "3-done-1920")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	before := readView(t, ctx)
	checkWalk(t, ctx, before)

	first.stop(t)
	second := serveWith(t, dbPath, addr, model, tools, acfg, bot.Config{}, web.Config{}, history)
	second.start(t)
	if err := chromedp.Do(ctx,
		chromedp.Reload(),
		textIn("#conn", "live"),
		textIn("#messages .msg-answer", "report.md"),
	); err != nil {
		t.Fatalf("browser, after the restart: %v", err)
	}
	shoot(t, ctx, shots, "4-after-restart")
	after := readView(t, ctx)
	if strings.Join(after.Threads, "|") != strings.Join(before.Threads, "|") || after.Title != before.Title {
		t.Errorf("after the restart: threads %q titled %q, before %q titled %q", after.Threads, after.Title, before.Threads, before.Title)
	}
	if strings.Join(after.Messages, "\n") != strings.Join(before.Messages, "\n") {
		t.Errorf("after the restart the thread shows:\n%s\nbefore:\n%s", strings.Join(after.Messages, "\n"), strings.Join(before.Messages, "\n"))
	}
	checkWalk(t, ctx, after)
	checkLayout(t, ctx)
	if n := write.count(); n != 1 {
		t.Errorf("write_file ran %d times, want once", n)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model was asked %d times, want 3", n)
	}
	noScriptRan(t, ctx)
}

// checkWalk checks the finished walk as the page shows it: the goal first, one question,
// decided, no live button anywhere, the file as a preview and the answer's quote.
func checkWalk(t *testing.T, ctx context.Context, v pageView) {
	t.Helper()
	if v.Title != "deploy the site" || len(v.Threads) != 1 {
		t.Errorf("threads %q, title %q: want one, named by its goal", v.Threads, v.Title)
	}
	var kinds []string
	for _, m := range v.Messages {
		kinds = append(kinds, strings.Fields(m)[1])
	}
	if got, want := strings.Join(kinds, " "), "user status question approval answer"; got != want {
		t.Errorf("messages of kinds %q, want %q:\n%s", got, want, strings.Join(v.Messages, "\n"))
	}
	if len(v.Messages) > 0 && !strings.Contains(v.Messages[0], "deploy the site") {
		t.Errorf("the first message is %q, want the goal", v.Messages[0])
	}
	// Only the answer's rating buttons stay live: people may rate, or change their rating,
	// after the run ended.
	live, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages button[data-action]:not([data-feedback])').length`))
	if err != nil {
		t.Fatal(err)
	}
	if rating, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages .msg-answer button[data-feedback]').length`)); err != nil || rating != 2 {
		t.Errorf("%d rating buttons on the answer (err %v), want 2", rating, err)
	}
	if live != 0 {
		t.Errorf("%d live buttons on a finished run's cards", live)
	}
	// The tool calls are steps of the status card, the failed one and the write, after a
	// restart too.
	steps, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#messages .msg-status details.step')].map(d => d.dataset.step + ' ' + d.className).join(', ')`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "call_list step step-failed, call_write step step-done"; steps != want {
		t.Errorf("the status card's steps are %q, want %q", steps, want)
	}
	file, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#messages .msg-approval .arg-file') || {}).textContent || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if file != reportContent {
		t.Errorf("the approval card shows the file as %q, want %q", file, reportContent)
	}
}

// TestBrowserRestartPendingKeepsOrder restarts loopbot while an approval waits, with the
// console's history: the restarted bot re-sends the status and approval cards as edits,
// which must land in place (not appended, the approval above the status card), and the
// Approve there, pressed from the keyboard, must finish the run.
func TestBrowserRestartPendingKeepsOrder(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t, deployScript()...)
	dbPath := filepath.Join(t.TempDir(), "bot.db")
	history := web.WithHistory(dbPath+".console", 0)
	acfg := agent.Config{MaxSteps: 10}

	first := serveWith(t, dbPath, "127.0.0.1:0", model, []agent.Tool{tool}, acfg, bot.Config{}, web.Config{}, history)
	first.start(t)
	url, addr := first.srv.URL, first.addr()
	if err := chromedp.Do(ctx, startGoal(url, "", "you")); err != nil {
		t.Fatalf("browser, first process: %v", err)
	}
	before := readView(t, ctx)
	first.stop(t)

	second := serveWith(t, dbPath, addr, model, []agent.Tool{tool}, acfg, bot.Config{}, web.Config{}, history)
	second.start(t)
	if err := chromedp.Do(ctx,
		chromedp.Reload(),
		textIn("#conn", "live"),
		chromedp.WaitVisible(chromedp.CSS(approveButton)),
	); err != nil {
		t.Fatalf("browser, after the restart: %v", err)
	}
	after := readView(t, ctx)
	kinds := func(v pageView) string {
		var k []string
		for _, m := range v.Messages {
			k = append(k, strings.Fields(m)[0]+" "+strings.Fields(m)[1])
		}
		return strings.Join(k, ", ")
	}
	if kinds(after) != kinds(before) || !strings.HasSuffix(kinds(after), "approval") || after.Title != "deploy the site" {
		t.Errorf("after the restart the thread %q holds %s; before, %q held %s", after.Title, kinds(after), before.Title, kinds(before))
	}
	// "a" approves the thread's pending call when no text box has the focus.
	if err := chromedp.Do(ctx,
		chromedp.Blur(chromedp.CSS("#reply")),
		chromedp.KeyEvent("a"),
		textIn("#messages .msg-approval", "Approved by you"),
		textIn("#messages .msg-answer", "Deployed v1.2"),
	); err != nil {
		t.Fatalf("browser, approve from the keyboard: %v", err)
	}
	if n := tool.count(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
}
