package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// view is what GET /api/threads/{id} shows of a thread: its title and its messages in
// their order, each as its ID, kind and HTML.
func view(t *testing.T, a *Adapter, id string) (string, []string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	th, ok := a.threads[id]
	if !ok {
		t.Fatalf("no thread %s", id)
	}
	var out []string
	for _, e := range th.entries {
		out = append(out, e.id+" "+e.kind+" "+e.html)
	}
	return th.title, out
}

// TestHistorySurvivesRestart walks a thread (a goal, the status card, a question that is
// answered with Continue, an approval that is decided) and a thread the console learnt of
// from the bot alone, then opens a second console on the same history: it must show the
// same threads with the same titles, the same messages in the same order, the question and
// the approval as decided, and edit a restored card in place.
func TestHistorySurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db.console")
	ctx := context.Background()
	a1, srv1, _ := newServer(t, Config{}, WithHistory(path, 0))
	res, body := post(t, srv1, "/api/threads", goal("goal-0001", "", "deploy the site"))
	if res.StatusCode != 201 {
		t.Fatalf("new thread: %d %v", res.StatusCode, body)
	}
	id := body["thread"].(string)
	th := threadRef(id)
	status, _ := a1.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Working"})
	question := bot.Message{Kind: bot.KindQuestion, Title: "The run needs you", Text: "Stuck. Continue?",
		Footer:  "Reply in this thread with instructions, or choose:",
		Buttons: []bot.Button{{ID: "act-continue", Label: "Continue", Style: bot.StylePrimary}, {ID: "act-stop", Label: "Stop"}}}
	a1.Post(ctx, th, question)
	res, body = post(t, srv1, "/api/actions", `{"id":"click-0001","action":"act-continue","thread":"`+id+`"}`)
	if res.StatusCode != 200 {
		t.Fatalf("continue: %d %v", res.StatusCode, body)
	}
	approval, _ := a1.Post(ctx, th, bot.Message{Kind: bot.KindApproval, Title: "Approve deploy?",
		Buttons: []bot.Button{{ID: "act-approve", Label: "Approve"}}})
	a1.Update(ctx, approval, bot.Message{Kind: bot.KindApproval, Title: "deploy: approved", Text: "Approved by you."})
	a1.Update(ctx, status, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Waiting for a reply"})
	other := threadRef("t2")
	a1.Post(ctx, other, bot.Message{Kind: bot.KindStatus, Title: "summarise the issues", Text: "Queued"})

	title, msgs := view(t, a1, id)
	if len(msgs) != 4 {
		t.Fatalf("before the restart: %d messages, want 4: %q", len(msgs), msgs)
	}
	if q := msgs[2]; strings.Contains(q, "data-action") || !strings.Contains(q, "Continue: chosen by you") {
		t.Errorf("the answered question still offers its buttons, or does not say what was chosen: %s", q)
	}
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}

	a2, srv2, _ := newServer(t, Config{}, WithHistory(path, 0))
	title2, msgs2 := view(t, a2, id)
	if title2 != title || title != "deploy the site" {
		t.Errorf("title after the restart %q, before %q, want the goal", title2, title)
	}
	if strings.Join(msgs2, "\n") != strings.Join(msgs, "\n") {
		t.Errorf("messages after the restart:\n%s\nwant:\n%s", strings.Join(msgs2, "\n"), strings.Join(msgs, "\n"))
	}
	if title, _ := view(t, a2, "t2"); title != "summarise the issues" {
		t.Errorf("a thread known from the bot alone is named %q, want its goal", title)
	}
	// The page retrying its goal after the restart finds the thread it opened.
	if _, body := post(t, srv2, "/api/threads", goal("goal-0001", "", "deploy the site")); body["thread"] != id {
		t.Errorf("the same goal sent again after the restart went to %v, want %s", body["thread"], id)
	}
	_, list := getList(t, srv2, "/api/threads")
	if !strings.Contains(list, `"status":"Waiting for a reply"`) || !strings.Contains(list, `"status":"Queued"`) {
		t.Errorf("thread list after the restart: %s", list)
	}

	// The restarted bot re-sends its cards as edits of the messages it posted: they change
	// in place, and what is new comes after everything restored.
	if err := a2.Update(ctx, approval, bot.Message{Kind: bot.KindApproval, Title: "deploy: approved", Text: "Approved by you, again."}); err != nil {
		t.Fatal(err)
	}
	a2.Post(ctx, th, bot.Message{Kind: bot.KindAnswer, Text: "Deployed."})
	_, msgs3 := view(t, a2, id)
	if len(msgs3) != 5 || !strings.Contains(msgs3[3], "again") || !strings.Contains(msgs3[4], "Deployed.") {
		t.Errorf("after an edit and a post on the restarted console: %q", msgs3)
	}
	a2.mu.Lock()
	entries := a2.threads[id].entries
	for i := 1; i < len(entries); i++ {
		if entries[i].pos <= entries[i-1].pos {
			t.Errorf("message %d has position %d after %d: the page would reorder them", i, entries[i].pos, entries[i-1].pos)
		}
	}
	a2.mu.Unlock()
}

// TestHistoryRewrite bounds the file: past its limit it is rewritten to what the console
// holds, and what it holds after comes back the same.
func TestHistoryRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console")
	const limit = 4 << 10
	ctx := context.Background()
	a1, _, _ := newServer(t, Config{MaxMessages: 3}, WithHistory(path, limit))
	th := threadRef("t1")
	ref, _ := a1.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Title: "a goal", Text: "Working"})
	maxSize := int64(0)
	for i := range 200 {
		a1.Update(ctx, ref, bot.Message{Kind: bot.KindStatus, Title: "a goal", Text: "Working: step " + strings.Repeat("x", i%50)})
		if i%10 == 0 {
			a1.Post(ctx, th, bot.Message{Kind: bot.KindNotice, Text: "note " + strings.Repeat("y", i)})
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, st.Size())
	}
	// One record past the limit at most, before it is rewritten.
	if maxSize > 2*limit {
		t.Errorf("the history grew to %d bytes with a limit of %d", maxSize, limit)
	}
	_, msgs := view(t, a1, "t1")
	a1.Close()
	a2, _, _ := newServer(t, Config{MaxMessages: 3}, WithHistory(path, limit))
	if _, msgs2 := view(t, a2, "t1"); strings.Join(msgs2, "\n") != strings.Join(msgs, "\n") {
		t.Errorf("after a rewrite and a restart:\n%s\nwant:\n%s", strings.Join(msgs2, "\n"), strings.Join(msgs, "\n"))
	}
}

// TestHistoryDamage skips what it cannot use: a line cut by a crash, a line that is not
// JSON, and a record whose IDs the console would never make.
func TestHistoryDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	line := func(r record) string {
		b, _ := json.Marshal(r)
		return string(b) + "\n"
	}
	data := line(record{Op: opThread, Thread: "t1", At: at, Title: "kept"}) +
		"not json\n" +
		line(record{Op: opEntry, Thread: "../etc", At: at, ID: "m1", Msg: &bot.Message{Kind: bot.KindAnswer, Text: "bad thread"}}) +
		line(record{Op: opEntry, Thread: "t1", At: at, ID: "m2", Msg: &bot.Message{Kind: bot.KindAnswer, Text: "kept answer"}}) +
		`{"op":"entry","thread":"t1","id":"m3","msg":{"kind":"answer","te`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _, _ := newServer(t, Config{}, WithHistory(path, 0))
	title, msgs := view(t, a, "t1")
	if title != "kept" || len(msgs) != 1 || !strings.Contains(msgs[0], "kept answer") {
		t.Errorf("from a damaged history: %q %q", title, msgs)
	}
	if a.threadCount() != 1 {
		t.Errorf("%d threads, want 1", a.threadCount())
	}
}

// FuzzHistory feeds the console's history reader arbitrary files: it must never panic, and
// whatever it restores must be renderable and within the console's bounds.
func FuzzHistory(f *testing.F) {
	f.Add([]byte(`{"op":"thread","thread":"t1","title":"x"}` + "\n" + `{"op":"entry","thread":"t1","id":"m1","msg":{"kind":"status","title":"g"}}`))
	f.Add([]byte(`{"op":"gone","thread":"t1"}` + "\n" + `{"op":"entry","thread":"t1","id":"u1","kind":"user","user":"<b>","text":"hi"}`))
	f.Add([]byte(`{"op":"thread","thread":"t1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, _, err := decodeHistory(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		a, err := New(Config{MaxThreads: 3, MaxMessages: 3})
		if err != nil {
			t.Fatal(err)
		}
		a.restore(recs)
		if len(a.threads) > 3 {
			t.Fatalf("%d threads restored, bound 3", len(a.threads))
		}
		for _, th := range a.threads {
			if th.title == "" {
				t.Fatalf("thread %s restored without a title", th.id)
			}
			if len(th.entries) > 3 {
				t.Fatalf("%d messages restored, bound 3", len(th.entries))
			}
			for _, e := range th.entries {
				checkSafeHTML(t, e.html)
			}
		}
	})
}

// TestHistoryWriteFailure: a history that cannot be written (a full disk, say) leaves the
// console working from memory and is logged once, not at every message.
func TestHistoryWriteFailure(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	path := filepath.Join(t.TempDir(), "console")
	a, _, _ := newServer(t, Config{}, WithHistory(path, 0), WithLogger(log))
	// The file is closed under the history's feet: every write fails.
	a.hist.f.Close()
	ctx := context.Background()
	for i := range 3 {
		if _, err := a.Post(ctx, threadRef("t1"), bot.Message{Kind: bot.KindNotice, Text: "note " + strconv.Itoa(i)}); err != nil {
			t.Fatalf("post with a broken history: %v", err)
		}
	}
	if _, msgs := view(t, a, "t1"); len(msgs) != 3 {
		t.Errorf("%d messages shown, want 3", len(msgs))
	}
	if n := strings.Count(logged.String(), "could not write the history file"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logged.String())
	}
}

// TestQuestionChosen: a question's buttons go when the bot takes a click on one of them,
// and only then: a click the bot refuses (a notice) leaves them, and the cards the bot
// edits itself (approvals) are left to it.
func TestQuestionChosen(t *testing.T) {
	question := bot.Message{Kind: bot.KindQuestion, Title: "The run needs you", Footer: "or choose:",
		Buttons: []bot.Button{{ID: "act-continue", Label: "Continue"}, {ID: "act-stop", Label: "Stop"}}}
	approval := bot.Message{Kind: bot.KindApproval, Title: "Approve deploy?", Buttons: []bot.Button{{ID: "act-approve", Label: "Approve"}}}
	tests := []struct {
		name, notice, action string
		wantQuestion         string // what the question's card must contain
		wantApprovalLive     bool
	}{
		{"continue taken", "", "act-continue", "Continue: chosen by you", true},
		{"stop taken", "", "act-stop", "Stop: chosen by you", true},
		{"refused", "Only the person who started this run or an approver can do that.", "act-continue", `data-action="act-continue"`, true},
		{"approval", "", "act-approve", `data-action="act-continue"`, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, srv, rec := newServer(t, Config{})
			rec.notice = tt.notice
			th := threadRef("t1")
			ctx := context.Background()
			a.Post(ctx, th, question)
			a.Post(ctx, th, approval)
			res, body := post(t, srv, "/api/actions", `{"id":"click-000`+strconv.Itoa(i)+`","action":"`+tt.action+`","thread":"t1"}`)
			if res.StatusCode != 200 {
				t.Fatalf("click: %d %v", res.StatusCode, body)
			}
			_, msgs := view(t, a, "t1")
			if !strings.Contains(msgs[0], tt.wantQuestion) {
				t.Errorf("question after the click:\n%s\nwant it to contain %q", msgs[0], tt.wantQuestion)
			}
			if live := strings.Contains(msgs[1], `data-action="act-approve"`); live != tt.wantApprovalLive {
				t.Errorf("approval card live %v, want %v: the console must leave it to the bot", live, tt.wantApprovalLive)
			}
		})
	}
}

// TestGoalShownOnce: the status card, which the bot titles with the run's goal, goes
// without its title in a thread that shows the goal as the person's message already.
func TestGoalShownOnce(t *testing.T) {
	tests := []struct {
		title string
		shown bool
	}{
		{"deploy the site to production", false},
		{"deploy the site t" + text.Ellipsis, false},
		{"a later goal", true},
		{"deploy" + text.Ellipsis + " elsewhere", true},
	}
	for i, tt := range tests {
		a, srv, _ := newServer(t, Config{})
		_, body := post(t, srv, "/api/threads", goal("goal-000"+strconv.Itoa(i), "", "deploy the site to production"))
		id := body["thread"].(string)
		a.Post(context.Background(), threadRef(id), bot.Message{Kind: bot.KindStatus, Title: tt.title, Text: "Working"})
		_, msgs := view(t, a, id)
		if shown := strings.Contains(msgs[1], "msg-title"); shown != tt.shown {
			t.Errorf("status card titled %q: title shown %v, want %v", tt.title, shown, tt.shown)
		}
	}
}
