package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The browser tests drive headless Chromium against a console with the real bot behind
// it: bbolt store, agent loop and approvals, and the real model client (agent/llm) talking
// to a scripted OpenAI-compatible server (llmtest) over HTTP.

// chromium finds a Chromium binary. Without one the tests skip, except under CI, where a
// missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found, and CI is set: install it (Debian: apt-get install -y chromium)")
	}
	t.Skip("no Chromium found; install it (Debian: apt-get install -y chromium) to run the browser tests")
	return ""
}

// deployArgs are the arguments the model gives deploy: HTML that must show as text.
const deployArgs = `{"version":"<img src=x onerror=alert(1)>"}`

// deployCallID is the ID of the model's deploy call, which the tool's result must answer.
const deployCallID = "call_deploy"

// deployScript is the model's side of a run: it asks to deploy, then answers with what it
// saw, which is the tool's result or the word that the call was rejected.
func deployScript() []llmtest.Step {
	return []llmtest.Step{
		llmtest.ToolCalls(llmtest.ToolCall{ID: deployCallID, Name: "deploy", Arguments: deployArgs}),
		llmtest.Func(func(r llmtest.Request) llmtest.Step {
			if strings.Contains(r.LastMessage().Content, "deployed v1.2") {
				return llmtest.Text("Deployed **v1.2**. <script>alert(1)</script>")
			}
			return llmtest.Text("I did not deploy: the call was rejected.")
		}),
	}
}

// checkModelSaw checks that the model was consulted exactly twice: once with the goal and
// the deploy tool offered, once with the tool's outcome answering its call.
func checkModelSaw(t *testing.T, model *llmtest.Server, outcome string) {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	if !strings.Contains(first.LastMessage().Content, "deploy the site") {
		t.Errorf("first request ends with %+v, want the goal", first.LastMessage())
	}
	offered := false
	for _, tool := range first.Tools {
		offered = offered || tool.Name == "deploy"
	}
	if !offered {
		t.Errorf("first request offers %+v, want deploy among them", first.Tools)
	}
	last := second.LastMessage()
	if last.Role != "tool" || last.ToolCallID != deployCallID || !strings.Contains(last.Content, outcome) {
		t.Errorf("second request ends with %+v, want the tool result of %s saying %q", last, deployCallID, outcome)
	}
}

// deploy is a tool that needs an approval.
type deploy struct {
	risk  agent.Risk
	mu    sync.Mutex
	calls int
}

func (d *deploy) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "deploy", Description: "deploys the site",
		Parameters: json.RawMessage(`{"type":"object","properties":{"version":{"type":"string"}}}`)}}
}

func (d *deploy) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: d.risk, Reason: "changes <b>production</b>"}
}

func (d *deploy) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return "deployed v1.2", nil
}

// count is how many times the tool ran.
func (d *deploy) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// daemon is one loopbot process: store, agent, bot and console, serving on one address.
type daemon struct {
	db  *store.DB
	bot *bot.Bot
	con *web.Adapter
	srv *httptest.Server
	// refused gets the path of every event stream request answered 404.
	refused chan string
	stopped bool
}

// serve opens the store at dbPath and serves the console on addr ("127.0.0.1:0" for any
// port), with the bot built but not started: start starts it.
func serve(t *testing.T, dbPath, addr string, model *llmtest.Server, tool *deploy, cfg bot.Config, webCfg web.Config) *daemon {
	t.Helper()
	return serveWith(t, dbPath, addr, model, []agent.Tool{tool}, agent.Config{MaxSteps: 10}, cfg, webCfg)
}

// serveWith is serve with the agent's tools and configuration, and the console's options.
func serveWith(t *testing.T, dbPath, addr string, model *llmtest.Server, tools []agent.Tool, acfg agent.Config, cfg bot.Config, webCfg web.Config, opts ...web.Option) *daemon {
	t.Helper()
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	client, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(acfg, client, tools)
	if err != nil {
		t.Fatal(err)
	}
	webCfg.Banner = "DEMO MODE: a scripted model is playing a sample run"
	// The console keeps its view in the bot's store, as cmd wires it.
	con, err := web.New(webCfg, append([]web.Option{web.WithPolicy(cfg.Policy), web.WithViewStore(db)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EditInterval = agent.Duration(100 * time.Millisecond)
	b, err := bot.New(cfg, db, ag, []bot.Platform{con})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	d := &daemon{db: db, bot: b, con: con, refused: make(chan string, 64)}
	h := con.HTTPHandler(b)
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if r.URL.Path == "/api/events" && sw.code == http.StatusNotFound {
			select {
			case d.refused <- r.URL.RequestURI():
			default:
			}
		}
	}))
	d.srv.Listener.Close()
	d.srv.Listener = ln
	d.srv.Start()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// start starts the bot, which re-sends the cards of unfinished runs.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	if err := d.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// addr is the host:port the console listens on.
func (d *daemon) addr() string { return d.srv.Listener.Addr().String() }

// stop stops the bot (runs save their state, the outbox is flushed to the console), then
// the console, then closes the store, as the process would on its way out.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if d.stopped {
		return
	}
	d.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.bot.Stop(ctx); err != nil {
		t.Errorf("stop bot: %v", err)
	}
	// The page's event stream never ends on its own.
	d.srv.CloseClientConnections()
	d.srv.Close()
	if err := d.con.Close(); err != nil {
		t.Errorf("close console: %v", err)
	}
	if err := d.db.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
}

// statusWriter notes the status of a response. Unwrap lets http.ResponseController reach
// the real writer's Flush and deadlines, which the event stream needs.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// console starts a bot and its console and returns the console's URL.
func console(t *testing.T, model *llmtest.Server, tool *deploy, cfg bot.Config, webCfg web.Config) string {
	t.Helper()
	d := serve(t, filepath.Join(t.TempDir(), "bot.db"), "127.0.0.1:0", model, tool, cfg, webCfg)
	d.start(t)
	return d.srv.URL
}

// browser opens a headless Chromium tab for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the tests may run as root in a container
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return ctx
}

// textIn waits until the element sel contains text.
func textIn(sel, text string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
	poll := chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		// The poll runs in the page's JavaScript context. When a navigation replaces that
		// context while the poll waits (the login's redirect landing late on a loaded
		// machine), Chrome answers that the context is gone: poll again in the new one.
		for tries := 1; ; tries++ {
			v, err := poll(ctx, t)
			if err == nil || !isContextGone(err) || ctx.Err() != nil || tries == 20 {
				return v, err
			}
		}
	}
}

// isContextGone tells Chrome's errors for a JavaScript context that a navigation replaced.
func isContextGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed")
}

// text returns the text of the first element sel matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// login opens the console at base, signed in with token ("" on a single-person console),
// goes to path (a thread's "#/t/..." or "") and waits until the page says who it is.
func login(base, token, path, who string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{}
	if token != "" {
		// The login link sets the cookie and redirects to the console.
		steps = append(steps, chromedp.Navigate(base+"/?token="+token))
	}
	return chromedp.Steps(append(steps,
		chromedp.Navigate(base+"/"+path),
		textIn("#who", "You are "+who),
	)...)
}

// startGoal signs in, types a goal and waits for the run to ask for approval.
func startGoal(url, token, who string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		login(url, token, "", who),
		chromedp.SendKeys(chromedp.CSS("#goal"), "deploy the site"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-user")),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-status")),
		// The status card changes as the run goes.
		textIn("#messages .msg-status", "Waiting for approval"),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-approval button.btn-primary")),
	)
}

// approveButton is the Approve button of the thread's approval card.
const approveButton = "#messages .msg-approval button.btn-primary"

// acceptDialogs accepts every JavaScript dialog the tab opens (the confirmation of a
// dangerous call) and returns their messages so far.
func acceptDialogs(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opening {
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, ev.Message)
			mu.Unlock()
			// The dialog is answered from another goroutine than the one that reads
			// the events, as chromedp requires. Its error matters not: if the tab is
			// gone, the test's own waits fail and say so.
			go chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				return err
			}))
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// noScriptRan fails if the page ran script from a message.
func noScriptRan(t *testing.T, ctx context.Context) {
	t.Helper()
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages img, #messages script').length`))
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 0 {
		t.Errorf("the page holds %d img or script elements from messages", imgs)
	}
}

func TestBrowserApprove(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t, deployScript()...)
	url := console(t, model, tool, bot.Config{}, web.Config{})
	err := chromedp.Do(ctx,
		startGoal(url, "", "you"),
		chromedp.Click(chromedp.CSS(approveButton)),
		textIn("#messages .msg-answer", "Deployed v1.2"),
		textIn("#messages .msg-status", "Done"),
		textIn("#messages .msg-approval", "Approved by you"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	banner, answer, card := text(t, ctx, "#banner"), text(t, ctx, "#messages .msg-answer"), text(t, ctx, "#messages .msg-approval")
	if !strings.Contains(banner, "DEMO MODE") {
		t.Errorf("banner %q", banner)
	}
	if w := text(t, ctx, "#identity-warning"); !strings.Contains(w, "dangerous_needs_other cannot be enforced here") {
		t.Errorf("identity warning %q", w)
	}
	if !strings.Contains(answer, "<script>alert(1)</script>") {
		t.Errorf("answer %q: the model's HTML should show as text", answer)
	}
	if !strings.Contains(card, "<img src=x onerror=alert(1)>") {
		t.Errorf("approval card %q: the arguments should show as text", card)
	}
	if n := tool.count(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
	checkModelSaw(t, model, "deployed v1.2")
	noScriptRan(t, ctx)
}

// TestBrowserReject presses Reject, with and without a reason typed in the card's field: the
// call does not run, the model is told of the rejection once, with the reason when there is
// one, and the decided card shows it.
func TestBrowserReject(t *testing.T) {
	for _, reason := range []string{"", "prod is frozen <b>this</b> week"} {
		t.Run(fmt.Sprintf("reason %q", reason), func(t *testing.T) {
			ctx := browser(t)
			tool := &deploy{risk: agent.RiskConfirm}
			model := llmtest.NewTest(t, deployScript()...)
			url := console(t, model, tool, bot.Config{}, web.Config{})
			decided := "Rejected by you"
			acts := []chromedp.Action[chromedp.Void]{startGoal(url, "", "you")}
			if reason != "" {
				acts = append(acts, chromedp.SendKeys(chromedp.CSS("#messages .msg-approval input.reason"), reason))
				decided = "Reason: " + reason
			}
			acts = append(acts,
				chromedp.Click(chromedp.CSS("#messages .msg-approval button.btn-danger")),
				textIn("#messages .msg-approval", decided),
				textIn("#messages .msg-answer", "the call was rejected"),
			)
			if err := chromedp.Do(ctx, acts...); err != nil {
				t.Fatalf("browser: %v", err)
			}
			if n := tool.count(); n != 0 {
				t.Errorf("deploy ran %d times after a rejection", n)
			}
			reqs := model.Requests()
			if len(reqs) != 2 || reqs[1].LastMessage().ToolCallID != deployCallID || strings.Contains(reqs[1].LastMessage().Content, "deployed") ||
				!strings.Contains(reqs[1].LastMessage().Content, reason) {
				t.Errorf("the model should have been told of the rejection once, with the reason; it got %d requests", len(reqs))
			}
			noScriptRan(t, ctx)
		})
	}
}

// TestBrowserRestart restarts loopbot while an approval is pending, with a console that
// keeps no view (no store, no history: a thread it forgot is the same to the page). The new
// process's console knows no thread, so the page's stream is refused with a 404 until the
// bot starts and re-sends the pending cards; the page must retry by itself, show the
// approval card again, and an Approve clicked there must run the tool once across both
// processes.
func TestBrowserRestart(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t, deployScript()...)
	dbPath := filepath.Join(t.TempDir(), "bot.db")

	noView := web.WithViewStore(nil)
	first := serveWith(t, dbPath, "127.0.0.1:0", model, []agent.Tool{tool}, agent.Config{MaxSteps: 10}, bot.Config{}, web.Config{}, noView)
	first.start(t)
	url, addr := first.srv.URL, first.addr()
	if err := chromedp.Do(ctx, startGoal(url, "", "you")); err != nil {
		t.Fatalf("browser, first process: %v", err)
	}
	first.stop(t)

	// The console comes back on the same address before the bot starts, as it may when
	// loopbot starts: until the bot re-sends the cards, the thread is unknown.
	second := serveWith(t, dbPath, addr, model, []agent.Tool{tool}, agent.Config{MaxSteps: 10}, bot.Config{}, web.Config{}, noView)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case path := <-second.refused:
		t.Logf("the restarted console refused %s, as expected", path)
	case <-wait.Done():
		t.Fatal("the page never asked the restarted console for its thread's stream")
	}
	if err := chromedp.Do(ctx, textIn("#conn", "reconnecting")); err != nil {
		t.Fatalf("browser, while the thread is unknown: %v", err)
	}
	second.start(t)

	err := chromedp.Do(ctx,
		// Only the new process's cards are on the page: the stream reset it.
		textIn("#messages .msg-approval", "deploy"),
		chromedp.WaitVisible(chromedp.CSS(approveButton)),
		textIn("#conn", "live"),
		chromedp.Click(chromedp.CSS(approveButton)),
		textIn("#messages .msg-approval", "Approved by you"),
		textIn("#messages .msg-answer", "Deployed v1.2"),
		textIn("#messages .msg-status", "Done"),
	)
	if err != nil {
		t.Fatalf("browser, second process: %v", err)
	}
	gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('gone').hidden`))
	if err != nil {
		t.Fatal(err)
	}
	if !gone {
		t.Error("the page says the thread is gone, after it came back")
	}
	if n := tool.count(); n != 1 {
		t.Errorf("deploy ran %d times across both processes, want once", n)
	}
	// The paused run was not restarted from scratch: the model was asked once for the call
	// and once with its result.
	checkModelSaw(t, model, "deployed v1.2")
}

// Per-user tokens of TestBrowserTwoPeople.
const (
	annToken = "ann-0123456789abcdef"
	bobToken = "bob-0123456789abcdef"
)

// TestBrowserTwoPeople has ann start a dangerous call that she may not approve herself: her
// click gets a notice only she sees, and bob, signed in with his own token in a browser
// context of his own, approves it. He sees her thread because he is an approver.
func TestBrowserTwoPeople(t *testing.T) {
	annCtx := browser(t)
	tool := &deploy{risk: agent.RiskDangerous}
	model := llmtest.NewTest(t, deployScript()...)
	url := console(t, model, tool, bot.Config{Policy: bot.Policy{Approvers: []string{"web:bob"}}},
		web.Config{Users: map[string]string{"ann": annToken, "bob": bobToken}})

	annDialogs := acceptDialogs(t, annCtx)
	if err := chromedp.Do(annCtx,
		startGoal(url, annToken, "ann"),
		chromedp.Click(chromedp.CSS(approveButton)),
		textIn("#toasts .toast-notice", "someone other than the person who started the run"),
		// The card itself says so too, where she is looking.
		textIn("#messages .msg-approval .card-notice", "someone other than the person who started the run"),
		// The refused click leaves the buttons usable and the call pending.
		chromedp.WaitEnabled(chromedp.CSS(approveButton)),
	); err != nil {
		t.Fatalf("browser, ann: %v", err)
	}
	shoot(t, annCtx, screenshots(t), "5-refused-click")
	if d := annDialogs(); len(d) != 1 || !strings.Contains(d[0], "dangerous") {
		t.Errorf("ann's confirmations %q, want one that says the call is dangerous", d)
	}
	hash, err := chromedp.Run(annCtx, chromedp.Evaluate[string](`location.hash`))
	if err != nil {
		t.Fatal(err)
	}

	// A browser context of his own, so bob does not share ann's cookie.
	bobCtx, cancelBob := chromedp.NewContext(annCtx, chromedp.WithNewBrowserContext())
	defer cancelBob()
	bobDialogs := acceptDialogs(t, bobCtx)
	if err := chromedp.Do(bobCtx,
		login(url, bobToken, hash, "bob"),
		textIn("#messages .msg-status", "Waiting for approval"),
		chromedp.WaitVisible(chromedp.CSS(approveButton)),
		chromedp.Click(chromedp.CSS(approveButton)),
		textIn("#messages .msg-approval", "Approved by bob"),
		textIn("#messages .msg-answer", "Deployed v1.2"),
	); err != nil {
		t.Fatalf("browser, bob: %v", err)
	}
	if d := bobDialogs(); len(d) != 1 {
		t.Errorf("bob's confirmations %q, want one", d)
	}
	// Ann's page follows the thread too.
	if err := chromedp.Do(annCtx, textIn("#messages .msg-approval", "Approved by bob")); err != nil {
		t.Fatalf("browser, ann after bob: %v", err)
	}
	bobToasts, err := chromedp.Run(bobCtx, chromedp.Evaluate[string](`document.getElementById('toasts').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(bobToasts, "someone other") {
		t.Errorf("bob's page shows ann's notice: %q", bobToasts)
	}
	if n := tool.count(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
	checkModelSaw(t, model, "deployed v1.2")
}

// TestBrowserPauseAndResume presses Pause on the status card while the run waits for an
// approval: once the call is approved and has run, the run pauses before it consults the
// model again, the card offers Resume, and Resume brings the answer.
func TestBrowserPauseAndResume(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t, deployScript()...)
	url := console(t, model, tool, bot.Config{}, web.Config{})
	err := chromedp.Do(ctx,
		startGoal(url, "", "you"),
		chromedp.Click(chromedp.CSS("#messages .msg-status button.btn-default")),
		textIn("#messages .msg-status", "pausing at the next step, asked by you"),
		chromedp.Click(chromedp.CSS("#messages .msg-approval button.btn-primary")),
		textIn("#messages .msg-status", "Waiting for a reply"),
		textIn("#messages .msg-status button.btn-primary", "Resume"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if n := len(model.Requests()); n != 1 || tool.count() != 1 {
		t.Fatalf("paused after %d model requests and %d deploys, want 1 and 1", n, tool.count())
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#messages .msg-status button.btn-primary")),
		textIn("#messages .msg-answer", "Deployed"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	checkModelSaw(t, model, "deployed v1.2")
	noScriptRan(t, ctx)
}

// TestBrowserRejectShortcut: "r" presses the latest card's Reject, not Reject and stop: the
// run goes on and answers.
func TestBrowserRejectShortcut(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{risk: agent.RiskConfirm}
	model := llmtest.NewTest(t, deployScript()...)
	url := console(t, model, tool, bot.Config{}, web.Config{})
	err := chromedp.Do(ctx,
		startGoal(url, "", "you"),
		chromedp.Blur(chromedp.CSS("#reply")),
		chromedp.KeyEvent("r"),
		textIn("#messages .msg-approval", "Rejected by you"),
		textIn("#messages .msg-answer", "the call was rejected"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if tool.count() != 0 || len(model.Requests()) != 2 {
		t.Fatalf("%d deploys and %d model requests, want 0 and 2", tool.count(), len(model.Requests()))
	}
}
