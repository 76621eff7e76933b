package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The browser tests drive headless Chromium against a console with the real bot behind
// it: bbolt store, agent loop and approvals. The model is a script in the test (the
// agent.Model interface), since the OpenAI-compatible client and its scripted server
// (agent/llm, agent/llm/llmtest) had not landed when these tests were written.

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

// script is a model that answers from a list, one reply per consultation, whatever the
// run: the first call asks to deploy, the second answers with what it saw.
type script struct {
	mu      sync.Mutex
	replies []func(req agent.Request) agent.Message
}

func (s *script) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) == 0 {
		return agent.Reply{}, fmt.Errorf("the script has no reply left")
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return agent.Reply{Message: r(req), Usage: agent.Usage{PromptTokens: 100, CompletionTokens: 10, Calls: 1}}, nil
}

// deploy is a tool that needs an approval.
type deploy struct {
	mu    sync.Mutex
	calls int
}

func (d *deploy) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "deploy", Description: "deploys the site",
		Parameters: json.RawMessage(`{"type":"object","properties":{"version":{"type":"string"}}}`)}}
}

func (d *deploy) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "changes <b>production</b>"}
}

func (d *deploy) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return "deployed v1.2", nil
}

// console starts the bot and the console and returns the console's URL.
func console(t *testing.T, tool *deploy) string {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	model := &script{replies: []func(agent.Request) agent.Message{
		func(agent.Request) agent.Message {
			return agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "deploy", Arguments: `{"version":"<img src=x onerror=alert(1)>"}`}}}
		},
		func(req agent.Request) agent.Message {
			// The last message is the tool's result, or the word that it was rejected.
			last := req.Messages[len(req.Messages)-1].Content
			if strings.Contains(last, "deployed v1.2") {
				return agent.Message{Role: agent.RoleAssistant, Content: "Deployed **v1.2**. <script>alert(1)</script>"}
			}
			return agent.Message{Role: agent.RoleAssistant, Content: "I did not deploy: the call was rejected."}
		},
	}}
	ag, err := agent.New(agent.Config{MaxSteps: 10}, model, []agent.Tool{tool})
	if err != nil {
		t.Fatal(err)
	}
	con, err := web.New(web.Config{Banner: "DEMO MODE: a scripted model is playing a sample run"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{EditInterval: bot.Duration(100 * time.Millisecond)}, db, ag, []bot.Platform{con})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("stop bot: %v", err)
		}
	})
	srv := httptest.NewServer(con.HTTPHandler(b))
	// The page's event stream never ends on its own.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
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
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))
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

// startGoal names the user, types a goal and waits for the run to ask for approval.
func startGoal(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#name-panel")),
		chromedp.SendKeys(chromedp.CSS("#name"), "ann"),
		chromedp.Click(chromedp.CSS("#name-submit")),
		chromedp.WaitNotVisible(chromedp.CSS("#name-panel")),
		chromedp.SendKeys(chromedp.CSS("#goal"), "deploy the site"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-user")),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-status")),
		// The status card changes as the run goes.
		textIn("#messages .msg-status", "Waiting for approval"),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-approval button.btn-primary")),
	)
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
	tool := &deploy{}
	url := console(t, tool)
	err := chromedp.Do(ctx,
		startGoal(url),
		chromedp.Click(chromedp.CSS("#messages .msg-approval button.btn-primary")),
		textIn("#messages .msg-answer", "Deployed v1.2"),
		textIn("#messages .msg-status", "Done"),
		textIn("#messages .msg-approval", "Approved by ann"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	banner, answer, card := text(t, ctx, "#banner"), text(t, ctx, "#messages .msg-answer"), text(t, ctx, "#messages .msg-approval")
	if !strings.Contains(banner, "DEMO MODE") {
		t.Errorf("banner %q", banner)
	}
	if !strings.Contains(answer, "<script>alert(1)</script>") {
		t.Errorf("answer %q: the model's HTML should show as text", answer)
	}
	if !strings.Contains(card, "<img src=x onerror=alert(1)>") {
		t.Errorf("approval card %q: the arguments should show as text", card)
	}
	if tool.calls != 1 {
		t.Errorf("deploy ran %d times, want once", tool.calls)
	}
	noScriptRan(t, ctx)
}

func TestBrowserReject(t *testing.T) {
	ctx := browser(t)
	tool := &deploy{}
	url := console(t, tool)
	err := chromedp.Do(ctx,
		startGoal(url),
		chromedp.Click(chromedp.CSS("#messages .msg-approval button.btn-danger")),
		textIn("#messages .msg-approval", "Rejected by ann"),
		textIn("#messages .msg-answer", "the call was rejected"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if tool.calls != 0 {
		t.Errorf("deploy ran %d times after a rejection", tool.calls)
	}
	noScriptRan(t, ctx)
}
