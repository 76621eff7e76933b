package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// asker is a tool whose call asks which room to book and returns the answer it got.
type asker struct{ answers chan agent.Answer }

func (a *asker) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "book", Description: "books a room",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}
func (a *asker) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test"}
}
func (a *asker) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	ans, err := agent.Ask(ctx, agent.Question{From: "MCP server rooms", Text: "Which room?", Options: []string{"small", "large"}})
	if err != nil {
		return "", err
	}
	a.answers <- ans
	return "booked " + ans.Text, nil
}

// questionAnsweredAcross asks on replica a (leases of ttl) and answers with ann's reply on
// replica b, whose notifications are lost if lose is set; it returns what a's call got.
func questionAnsweredAcross(t *testing.T, ttl time.Duration, lose bool) agent.Answer {
	t.Helper()
	url := pgtest.URL(t)
	clk := &testClock{}
	tool := &asker{answers: make(chan agent.Answer, 1)}
	srv := llmtest.New(llmtest.ToolCalls(llmtest.Call("book", `{}`)))
	srv.SetFallback(llmtest.Text("Booked."))
	a := startReplicaTTL(t, "a", url, clk, srv, ttl, tool)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	ann := bot.User{ID: "U1", Name: "ann"}
	res, err := a.bot.Handle(t.Context(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "book a room"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's call to ask", func() bool {
		var asking bool
		_ = a.db.View(t.Context(), func(tx bot.Tx) error {
			conv, err := tx.Conversation(thread)
			asking = err == nil && conv.Asking != nil
			return err
		})
		return asking
	})
	b := startReplicaTTL(t, "b", url, clk, srv, ttl, tool)
	b.db.Lose(lose)
	got, err := b.bot.Handle(t.Context(), bot.Event{ID: "ev-2", Kind: bot.EventReply, Thread: thread, User: ann, Text: "large"})
	if err != nil || got.RunID != res.RunID || got.Notice != "" {
		t.Fatalf("b handles the reply: %+v, %v; want it to answer the run's question", got, err)
	}
	var ans agent.Answer
	select {
	case ans = <-tool.answers:
	case <-time.After(20 * time.Second):
		t.Fatalf("a's call has no answer 20s after b took it; a's log:\n%s", a.log.String())
	}
	eventually(t, "the run to complete", func() bool { return storedRun(t, a.db, res.RunID).Status == agent.StatusCompleted })
	if !strings.Contains(a.log.String(), "answer taken from another replica") {
		t.Errorf("a's log does not say it took the answer from the store:\n%s", a.log.String())
	}
	return ans
}

// TestQuestionAnsweredAcrossReplicas: a's call asks; ann's reply reaches replica b, which
// stores the answer and notifies a; a's call gets it long before its poll of the store (a
// third of a 10-minute lease) would find it.
func TestQuestionAnsweredAcrossReplicas(t *testing.T) {
	if got := questionAnsweredAcross(t, quietTTL, false); got != (agent.Answer{Kind: agent.AnswerGiven, Text: "large", By: "ann"}) {
		t.Errorf("a's call got %+v, want ann's large", got)
	}
}

// TestQuestionAnswerFoundWithoutNotification: b's notification is lost; a's call finds
// the answer at its poll of the store, a third of the 3s lease later.
func TestQuestionAnswerFoundWithoutNotification(t *testing.T) {
	if got := questionAnsweredAcross(t, 3*time.Second, true); got.Kind != agent.AnswerGiven || got.Text != "large" {
		t.Errorf("a's call got %+v, want large", got)
	}
}
