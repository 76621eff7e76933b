package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser test of issue 4: headless Chromium against the daemon booted through Main with
// no credentials (demo mode). It starts a goal, watches the status card change, restarts the
// daemon while the approval is pending, approves in the page it had open, and sees the answer.

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found, and CI is set: install it (Debian: apt-get install -y chromium)")
	}
	t.Skip("no Chromium found; install it (Debian: apt-get install -y chromium) to run the browser test")
	return ""
}

func newTab(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return ctx
}

// shows waits until an element matching sel contains text.
func shows(sel, text string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))
}

func TestBrowserDemoApproveAcrossRestart(t *testing.T) {
	ctx := newTab(t)
	dir := t.TempDir()
	d := startDaemon(t, dir)
	url := d.console()
	const approve = "#messages .msg-approval button.btn-primary"
	err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		// The demo console is a single-person one: the page names no one itself.
		shows("#who", "You are you"),
		shows("#banner", "DEMO MODE"),
		chromedp.SendKeys(chromedp.CSS("#goal"), "write a report on the workspace"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		chromedp.WaitVisible(chromedp.CSS("#messages .msg-status")),
		shows("#messages .msg-status", "Look at the workspace"),
		shows("#messages .msg-status", "Waiting for approval"),
		// The demo is a planned run: the card shows the executor's question and the
		// planner's answer.
		shows("#messages .msg-status", "Question from executor s2"),
		shows("#messages .msg-status", "Planner: Write it to report.md"),
		chromedp.WaitVisible(chromedp.CSS(approve)),
	)
	if err != nil {
		t.Fatalf("browser, first daemon: %v\nlogs:\n%s", err, d.logs)
	}

	addr := d.m.srv.webAddr
	d.close()
	d = startDaemonOn(t, dir, addr)
	err = chromedp.Do(ctx,
		// The page reconnects by itself and the new daemon shows the pending card again.
		chromedp.WaitVisible(chromedp.CSS(approve)),
		chromedp.Click(chromedp.CSS(approve)),
		shows("#messages .msg-approval", "Approved by you"),
		shows("#messages .msg-answer", "wrote report.md"),
		shows("#messages .msg-status", "Done"),
	)
	if err != nil {
		t.Fatalf("browser, after the restart: %v\nlogs:\n%s", err, d.logs)
	}
	answer, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#messages .msg-answer")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, "demo mode") {
		t.Errorf("answer %q does not say it came from demo mode", answer)
	}
}
