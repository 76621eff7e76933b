package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestInboxAcrossReplicas: the events a replica accepted are its own to handle while it
// lives (bot/inbox.go). b starting while a is about to handle its accepted event leaves it
// to a, whose handling is then the first. Once a stops renewing its presence (paused,
// killed), b adopts a's next accepted event within the lease's time, and a's late handling
// of it is a duplicate.
func TestInboxAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	clk := &testClock{}
	srv := llmtest.New()
	srv.SetFallback(llmtest.Text("Done."))
	a := startReplica(t, "a", url, clk, srv)
	ann := bot.User{ID: "U1", Name: "ann"}
	ev1 := bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, User: ann, Text: "first"}
	ev2 := bot.Event{ID: "ev-2", Kind: bot.EventMention, Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T2"}, User: ann, Text: "second"}
	if _, err := a.bot.Accept(t.Context(), []bot.Event{ev1}); err != nil {
		t.Fatal(err)
	}
	b := startReplica(t, "b", url, clk, srv)
	if n := len(runsIn(t, b.db)); n != 0 {
		t.Fatalf("b's start handled a's accepted event: %d runs", n)
	}
	res, err := a.bot.Handle(t.Context(), ev1)
	if err != nil || res.Duplicate || res.RunID == "" {
		t.Fatalf("a handles its own event: %+v, %v; want the first handling", res, err)
	}

	if _, err := a.bot.Accept(t.Context(), []bot.Event{ev2}); err != nil {
		t.Fatal(err)
	}
	a.db.Set(true)
	clk.skip.Add(int64(4 * time.Second)) // past a's 3s presence
	eventually(t, "b to adopt a's second event", func() bool { return len(runsIn(t, b.db)) == 2 })
	if !strings.Contains(b.log.String(), "adopting the events of a gone replica") {
		t.Errorf("b's log does not say it adopted a's events:\n%s", b.log.String())
	}
	if res, err := a.bot.Handle(t.Context(), ev2); err != nil || !res.Duplicate {
		t.Errorf("a's late handling of its second event: %+v, %v; want a duplicate", res, err)
	}
}

func runsIn(t *testing.T, db bot.Store) []*bot.RunRecord {
	t.Helper()
	var runs []*bot.RunRecord
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}
