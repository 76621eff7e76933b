package bot_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// A tool's question asked on one replica and answered on another (ask.go): the replies and
// clicks of a thread reach whichever replica Slack gives them to.

// askTool asks which room to book, with buttons, and returns the answer it got.
type askTool struct {
	answers chan agent.Answer
}

func newAskTool() *askTool { return &askTool{answers: make(chan agent.Answer, 4)} }

func (a *askTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "book", Description: "books a room",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}

func (a *askTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "the test says safe"}
}

func (a *askTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	ans, err := agent.Ask(ctx, agent.Question{From: "MCP server rooms", Text: "Which room?", Options: []string{"small", "large"}})
	if err != nil {
		return "", err
	}
	a.answers <- ans
	return "booked " + ans.Text, nil
}

// answerOf is the answer the tool got, failing the test if it has none yet.
func (a *askTool) answerOf(t *testing.T) agent.Answer {
	t.Helper()
	select {
	case ans := <-a.answers:
		return ans
	default:
		t.Fatal("the call that asked has no answer")
		return agent.Answer{}
	}
}

func (a *askTool) unanswered(t *testing.T) {
	t.Helper()
	select {
	case ans := <-a.answers:
		t.Fatalf("the call got %+v, want it still waiting", ans)
	default:
	}
}

// conversationOf is the stored conversation of the test thread.
func conversationOf(t *testing.T, db *store.DB) *bot.Conversation {
	t.Helper()
	var conv *bot.Conversation
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		conv, err = tx.Conversation(thread)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return conv
}

// askScene is replica a of a bbolt store whose run's call asks, and the question once
// stored. Other replicas start after it, so that a claims the run.
type askScene struct {
	db    *store.DB
	clk   *clock
	m     *model
	book  *askTool
	a     *replica
	runID string
	q     *bot.PendingQuestion
}

// asking starts a with cfg on a new store, the model's fallback after the call being
// fallback, and a run whose call asks. It must live in a synctest bubble.
func asking(t *testing.T, cfg bot.Config, fallback llmtest.Step) *askScene {
	t.Helper()
	sc := &askScene{db: openStore(t), clk: &clock{}, m: newModel(t), book: newAskTool()}
	sc.m.add(use("book", `{}`))
	sc.m.srv.SetFallback(fallback)
	sc.a = newReplicaWith(t, cfg, "a", sc.db, sc.clk, sc.m, sc.book)
	res, err := sc.a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "book a room"})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	sc.runID, sc.q = res.RunID, conversationOf(t, sc.db).Asking
	if sc.q == nil {
		t.Fatalf("no question stored; a's log:\n%s", sc.a.log.buf.String())
	}
	return sc
}

// replica starts another replica id on the scene's store.
func (sc *askScene) replica(t *testing.T, cfg bot.Config, id string) *replica {
	t.Helper()
	return newReplicaWith(t, cfg, id, sc.db, sc.clk, sc.m, sc.book)
}

func optionAction(t *testing.T, q *bot.PendingQuestion, label string) string {
	t.Helper()
	for _, o := range q.Options {
		if o.Label == label {
			return o.Action
		}
	}
	t.Fatalf("no option %q in %+v", label, q.Options)
	return ""
}

func handleOn(t *testing.T, r *replica, ev bot.Event) bot.Result {
	t.Helper()
	ev.Thread = thread
	res, err := r.bot.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s handles %+v: %v", r.id, ev, err)
	}
	return res
}

// TestQuestionAnsweredOnAnotherReplica: a's call asks; bob, who may not control the run,
// is refused on b; ann's reply in words on b reaches the call on a before any time passes
// (b notifies a), and the stored question keeps no copy of the answer once a took it.
func TestQuestionAnsweredOnAnotherReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := asking(t, bot.Config{}, say("Booked."))
		db, book, a, runID, q := sc.db, sc.book, sc.a, sc.runID, sc.q
		b := sc.replica(t, bot.Config{}, "b")
		if q.Owner != "a" || q.Epoch != 1 {
			t.Fatalf("question asked under %s@%d, want a's lease at epoch 1", q.Owner, q.Epoch)
		}
		if got := handleOn(t, b, bot.Event{ID: "ev-2", Kind: bot.EventAction, User: bob, ActionID: optionAction(t, q, "large")}); got.Notice != "Only the person who started this run or an approver can do that." {
			t.Errorf("bob's click on b: notice %q", got.Notice)
		}
		synctest.Wait()
		book.unanswered(t)

		start := time.Now()
		handleOn(t, b, bot.Event{ID: "ev-3", Kind: bot.EventReply, User: ann, Text: "Large"})
		synctest.Wait()
		if waited := time.Since(start); waited != 0 {
			t.Errorf("%s passed in the bubble, want none (no poll)", waited)
		}
		if got := book.answerOf(t); got != (agent.Answer{Kind: agent.AnswerGiven, Text: "large", By: "ann"}) {
			t.Errorf("the call on a got %+v, want ann's large", got)
		}
		if !a.log.has("answer taken from another replica") {
			t.Errorf("a's log does not say it took the answer:\n%s", a.log.buf.String())
		}
		conv := conversationOf(t, db)
		if conv.Asking != nil || len(conv.Asked) != 1 || conv.Asked[0].Outcome != "large: chosen by ann." || conv.Asked[0].Reply != nil {
			t.Errorf("stored question after a took the answer: asking %+v, asked %s", conv.Asking, questionsJSON(conv.Asked))
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if rec := runOf(t, db, runID); rec.Status != agent.StatusCompleted {
			t.Errorf("run is %s, want completed", rec.Status)
		}
	})
}

// TestQuestionAnswerNotificationLost: b's notification of a click is lost; a finds the
// answer at its next look at the store, a third of the lease later, and not before.
func TestQuestionAnswerNotificationLost(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := asking(t, bot.Config{}, say("Booked."))
		book, q := sc.book, sc.q
		b := sc.replica(t, bot.Config{}, "b")
		b.store.Lose(true)
		handleOn(t, b, bot.Event{ID: "ev-2", Kind: bot.EventAction, User: ann, ActionID: optionAction(t, q, "small")})
		synctest.Wait()
		book.unanswered(t)
		time.Sleep(10 * time.Second) // a third of the 30s lease
		synctest.Wait()
		if got := book.answerOf(t); got.Kind != agent.AnswerGiven || got.Text != "small" {
			t.Errorf("the call on a got %+v, want small", got)
		}
	})
}

// TestQuestionOfATakenOverRun: a paused past its lease and b took the run over, so the call
// that asked on a no longer counts: ann's click on b closes the question as stale, and a,
// when it wakes, takes nothing from the store.
func TestQuestionOfATakenOverRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		gate := make(chan struct{})
		sc := asking(t, bot.Config{}, llmtest.Func(func(llmtest.Request) llmtest.Step {
			<-gate
			return say("Done.")
		}))
		db, book, runID, q := sc.db, sc.book, sc.runID, sc.q
		sc.a.store.Set(true)
		sc.clk.Advance(31 * time.Second)
		b := sc.replica(t, bot.Config{}, "b")
		synctest.Wait()
		if l := leaseOf(t, db, runID); l.Owner != "b" || l.Epoch != 2 {
			t.Fatalf("lease = %+v, want b's at epoch 2", l)
		}
		if got := handleOn(t, b, bot.Event{ID: "ev-2", Kind: bot.EventAction, User: ann, ActionID: optionAction(t, q, "large")}); got.Notice != "This question is closed: loopbot restarted while it waited, and the call that asked it did not survive." {
			t.Errorf("click on b: notice %q", got.Notice)
		}
		conv := conversationOf(t, db)
		if conv.Asking != nil || len(conv.Asked) != 1 || conv.Asked[0].Reply != nil {
			t.Errorf("stored question: asking %+v, asked %s; want it closed without an answer", conv.Asking, questionsJSON(conv.Asked))
		}
		close(gate)
		synctest.Wait()
		book.unanswered(t)
	})
}

// TestQuestionExpiredOnTheAskingReplica: b's clock is past the question's expiry while a's
// timer has not fired yet: b refuses the click and leaves the question to a, which closes
// it as expired when its timer fires.
func TestQuestionExpiredOnTheAskingReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := bot.Config{Policy: bot.Policy{ApprovalExpiry: agent.Duration(5 * time.Second)}}
		sc := asking(t, cfg, say("Not booked."))
		db, book, q := sc.db, sc.book, sc.q
		b := sc.replica(t, cfg, "b")
		sc.clk.Advance(6 * time.Second)
		if got := handleOn(t, b, bot.Event{ID: "ev-2", Kind: bot.EventAction, User: ann, ActionID: optionAction(t, q, "large")}); got.Notice != "This question has expired." {
			t.Errorf("late click on b: notice %q", got.Notice)
		}
		synctest.Wait()
		book.unanswered(t)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := book.answerOf(t); got.Kind != agent.AnswerCancelled {
			t.Errorf("the call on a got %+v, want cancelled", got)
		}
		if conv := conversationOf(t, db); conv.Asking != nil || len(conv.Asked) != 1 || conv.Asked[0].Outcome != "Closed: it was not answered within 5s." {
			t.Errorf("stored question: asking %+v, asked %s", conv.Asking, questionsJSON(conv.Asked))
		}
	})
}

func questionsJSON(qs []*bot.PendingQuestion) string {
	b, _ := json.Marshal(qs)
	return string(b)
}

// TestQuestionOfAnEarlierProcessOfTheSameReplica: a process restarted under a's replica ID
// (a2) before a's lease ran out receives the click. No call waits on the question in a2,
// and a's lease names a2's own ID, so the question is stale: a2 closes it rather than
// storing an answer for a call that cannot be there.
func TestQuestionOfAnEarlierProcessOfTheSameReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := asking(t, bot.Config{}, say("Done."))
		sc.a.store.Set(true)
		sc.a.store.Lose(true)
		book, q := sc.book, sc.q
		a2 := sc.replica(t, bot.Config{}, "a")
		if got := handleOn(t, a2, bot.Event{ID: "ev-2", Kind: bot.EventAction, User: ann, ActionID: optionAction(t, q, "large")}); got.Notice != "This question is closed: loopbot restarted while it waited, and the call that asked it did not survive." {
			t.Errorf("click on the restarted a: notice %q", got.Notice)
		}
		synctest.Wait()
		book.unanswered(t)
	})
}
