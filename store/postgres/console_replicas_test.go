package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// The web console on two replicas sharing one database: two bots, each with its own
// console, whose views are the store's (web.WithViewStore) and followed through the store's
// notifications. Both bots are started; a leads the outbox, being started first.

// heldModel is an OpenAI-compatible endpoint that streams. Its first reply streams the
// start of a narration and holds it until hold[0] is closed, then calls deploy; its second
// streams the start of the answer and holds it until hold[1] is closed, then finishes.
type heldModel struct {
	calls atomic.Int32
	hold  [2]chan struct{}
}

func (m *heldModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := m.calls.Add(1)
	chunk := func(delta, finish string) {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", n, delta, f)
		w.(http.Flusher).Flush()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	wait := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if n == 1 {
		chunk(`{"role":"assistant","content":"Checking the site first, then "}`, "")
		if !wait(m.hold[0]) {
			return
		}
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"deploy","arguments":"{}"}}]}`, "")
		chunk(`{}`, "tool_calls")
	} else {
		chunk(`{"role":"assistant","content":"Deployed to production, "}`, "")
		if !wait(m.hold[1]) {
			return
		}
		chunk(`{"content":"and the checks are green."}`, "")
		chunk(`{}`, "stop")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// confirmDeploy is a tool that needs a person's approval.
type confirmDeploy struct{ calls atomic.Int32 }

func (d *confirmDeploy) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "deploy", Description: "deploys the site",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}
func (d *confirmDeploy) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "deploys"}
}
func (d *confirmDeploy) Call(context.Context, agent.Invocation) (string, error) {
	d.calls.Add(1)
	return "deployed", nil
}

// consoleReplica is a bot with its console on the database at url.
type consoleReplica struct {
	bot *bot.Bot
	con *web.Adapter
	srv *httptest.Server
}

func startConsoleReplica(t *testing.T, id, url string, model http.Handler, tool agent.Tool) *consoleReplica {
	t.Helper()
	msrv := httptest.NewServer(model)
	t.Cleanup(msrv.Close)
	client, err := llm.New(llm.Config{BaseURL: msrv.URL, Model: "m", Stream: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 10}, client, []agent.Tool{tool})
	if err != nil {
		t.Fatal(err)
	}
	db := openURL(t, url)
	con, err := web.New(web.Config{}, web.WithViewStore(db))
	if err != nil {
		t.Fatal(err)
	}
	// Ten-minute leases: nothing here waits for a poll, only for the notifications.
	cfg := bot.Config{ReplicaID: id, LeaseTTL: agent.Duration(10 * time.Minute), EditInterval: agent.Duration(100 * time.Millisecond)}
	b, err := bot.New(cfg, db, ag, []bot.Platform{con})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := &consoleReplica{bot: b, con: con, srv: httptest.NewServer(con.HTTPHandler(b))}
	t.Cleanup(func() {
		r.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("stop %s: %v", id, err)
		}
		con.Close()
	})
	return r
}

func consolePost(t *testing.T, srv *httptest.Server, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Loopbot", "1")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode >= 300 {
		t.Fatalf("POST %s: %s %v", path, res.Status, out)
	}
	return out
}

// threadMessages is GET /api/threads/{id}: each message's kind and HTML.
func threadMessages(t *testing.T, srv *httptest.Server, id string) []string {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + "/api/threads/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return nil
	}
	var th struct {
		Messages []struct{ Kind, HTML string }
	}
	json.NewDecoder(res.Body).Decode(&th)
	var out []string
	for _, m := range th.Messages {
		out = append(out, m.Kind+": "+m.HTML)
	}
	return out
}

// pageEvents reads a page's event stream into a list the test looks at.
type pageEvents struct {
	mu  sync.Mutex
	evs []string
}

func (p *pageEvents) has(name, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.evs {
		if strings.HasPrefix(e, name+" ") && strings.Contains(e, text) {
			return true
		}
	}
	return false
}

func openPage(t *testing.T, srv *httptest.Server, thread string) *pageEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?thread="+thread, nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := &pageEvents{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var d map[string]any
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d)
				html, _ := d["html"].(string)
				p.mu.Lock()
				p.evs = append(p.evs, name+" "+html)
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); res.Body.Close(); <-done })
	return p
}

var actionRE = regexp.MustCompile(`data-action="([^"]+)"[^>]*>Approve once<`)

// TestConsoleAcrossReplicas: a person whose page is on replica b sees the goal, the cards,
// the streamed text and the answer of a run that replica a works (its first step, whose
// narration a streams) and whose outbox a sends (a leads it); their Approve on b reaches
// the run (which b's scheduler then takes, as the replica the click woke); and a console
// opened on the database later shows the same thread as b did.
func TestConsoleAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	model := &heldModel{hold: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	tool := &confirmDeploy{}
	a := startConsoleReplica(t, "a", url, model, tool)
	// a leads the outbox: Start elects before it returns, and b comes after.
	b := startConsoleReplica(t, "b", url, model, tool)

	// The goal reaches a (the person's other tab, or the load balancer's choice); a's
	// scheduler takes the run at once.
	id := consolePost(t, a.srv, "/api/threads", `{"id":"goal-0001","text":"deploy the site"}`)["thread"].(string)
	eventually(t, "b's console to know the thread", func() bool { return len(threadMessages(t, b.srv, id)) > 0 })
	page := openPage(t, b.srv, id)
	eventually(t, "the goal on b's page", func() bool { return page.has("message", "deploy the site") })
	eventually(t, "a's narration streamed to b's page", func() bool { return page.has("stream", "Checking the site first") })
	eventually(t, "the status card, sent by a, on b's page", func() bool { return page.has("message", "msg-status") })
	close(model.hold[0])
	var action string
	eventually(t, "the approval card, sent by a, on b's page", func() bool {
		for _, m := range threadMessages(t, b.srv, id) {
			if g := actionRE.FindStringSubmatch(m); g != nil {
				action = g[1]
				return true
			}
		}
		return false
	})
	if tool.calls.Load() != 0 {
		t.Fatal("deploy ran before it was approved")
	}
	consolePost(t, b.srv, "/api/actions", `{"id":"click-0001","action":"`+action+`","thread":"`+id+`"}`)
	eventually(t, "the answer streamed to b's page", func() bool { return page.has("stream", "Deployed to production") })
	close(model.hold[1])
	eventually(t, "the answer on b's page", func() bool { return page.has("message", "the checks are green") })
	if n := tool.calls.Load(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
	eventually(t, "the same view on both consoles", func() bool {
		return strings.Join(threadMessages(t, a.srv, id), "\n") == strings.Join(threadMessages(t, b.srv, id), "\n")
	})
	before := threadMessages(t, b.srv, id)
	for _, want := range []string{"deploy the site", "Approved", "the checks are green"} {
		if !strings.Contains(strings.Join(before, "\n"), want) {
			t.Errorf("b's console lacks %q: %q", want, before)
		}
	}

	// A restart: a console opened on the database alone rebuilds the same view.
	con, err := web.New(web.Config{}, web.WithViewStore(openURL(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { con.Close() })
	srv := httptest.NewServer(con.HTTPHandler(nil))
	t.Cleanup(srv.Close)
	if after := threadMessages(t, srv, id); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("after a restart:\n%s\nwant:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}
