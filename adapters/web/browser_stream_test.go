package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// heldStream is an OpenAI-compatible endpoint that streams the first words of its answer,
// then holds the rest until the test releases it.
type heldStream struct {
	first, rest string
	release     chan struct{}
}

func (h *heldStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	chunk := func(delta, finish string) {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, f)
		w.(http.Flusher).Flush()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk(fmt.Sprintf(`{"role":"assistant","content":%q}`, h.first), "")
	select {
	case <-h.release:
	case <-r.Context().Done():
		return
	}
	chunk(fmt.Sprintf(`{"content":%q}`, h.rest), "")
	chunk(`{}`, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestBrowserStreamsAnswer: with a streaming model, the page shows the first words of the
// answer while the model is still writing, and the final answer then takes their place.
func TestBrowserStreamsAnswer(t *testing.T) {
	ctx := browser(t)
	model := &heldStream{first: "Partial answer, ", rest: "and the **rest**.", release: make(chan struct{})}
	msrv := httptest.NewServer(model)
	t.Cleanup(msrv.Close)
	t.Cleanup(func() {
		select {
		case <-model.release:
		default:
			close(model.release)
		}
	})

	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := llm.New(llm.Config{BaseURL: msrv.URL, Model: "m", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 10}, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	con, err := web.New(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{EditInterval: agent.Duration(100 * time.Millisecond)}, db, ag, []bot.Platform{con})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{db: db, bot: b, con: con, srv: httptest.NewServer(con.HTTPHandler(b))}
	t.Cleanup(func() { d.stop(t) })
	d.start(t)

	answers := `[...document.querySelectorAll('#messages .entry[data-kind="answer"]')].length`
	err = chromedp.Do(ctx,
		login(d.srv.URL, "", "", "you"),
		chromedp.SendKeys(chromedp.CSS("#goal"), "answer slowly"),
		chromedp.Click(chromedp.CSS("#goal-submit")),
		textIn("#messages .entry-live .msg-answer", "Partial answer,"),
	)
	if err != nil {
		t.Fatalf("browser, while the model writes: %v", err)
	}
	shots := screenshots(t)
	shoot(t, ctx, shots, "stream-1-writing")
	before, err := chromedp.Run(ctx, chromedp.Evaluate[int](answers))
	if err != nil {
		t.Fatal(err)
	}
	if before != 0 {
		t.Errorf("%d answers shown while the model was still writing", before)
	}
	close(model.release)
	err = chromedp.Do(ctx,
		textIn(`#messages .entry[data-kind="answer"] .msg-answer`, "Partial answer, and the rest."),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#messages .entry-live').length === 0`, chromedp.WithPollingInterval(50*time.Millisecond)),
	)
	if err != nil {
		t.Fatalf("browser, after the answer: %v", err)
	}
	shoot(t, ctx, shots, "stream-2-answered")
	after, err := chromedp.Run(ctx, chromedp.Evaluate[int](answers))
	if err != nil {
		t.Fatal(err)
	}
	live, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages .entry-live').length`))
	if err != nil {
		t.Fatal(err)
	}
	if after != 1 || live != 0 {
		t.Errorf("%d answers and %d live texts after the answer, want the answer once in the live text's place", after, live)
	}
	noScriptRan(t, ctx)
}
