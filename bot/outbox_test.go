package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// callsTo returns the calls the bot made to one channel, failed ones included.
func (r *recorder) callsTo(channel string) []op {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []op
	for _, o := range r.ops {
		if o.ref.Thread.Channel == channel {
			out = append(out, o)
		}
	}
	return out
}

func TestCardEditsArePacedAndCoalesced(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// Each step of a tool with side effects stores the run three times (the model's
		// reply, the call's intent, its result), each with a new status card state: 67
		// steps make a burst of 201 card states within about 3s.
		const steps = 67
		step := &tool{name: "step", risk: agent.RiskSafe, out: "ok", delay: 40 * time.Millisecond}
		h := newHarness(t, bot.Config{}, step)
		for i := range steps {
			h.model.add(use("step", fmt.Sprintf(`{"q":"%d"}`, i)))
		}
		h.model.add(say("All steps done."))
		start := time.Now()
		h.mention(ann, "take many steps")
		h.settle()
		took := time.Since(start)

		calls := h.plat.callsTo("C1")
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].at.Sub(calls[i-1].at); gap < time.Second {
				t.Errorf("calls %d and %d to the channel were %s apart, want 1s at least", i-1, i, gap)
			}
		}
		cards := h.plat.sent(bot.KindStatus)
		t.Logf("%d card states stored, %d card calls over %s", 3*steps+1, len(cards), took)
		if max := int(took/time.Second) + 2; len(cards) > max {
			t.Errorf("%d status card calls over %s, want at most %d", len(cards), took, max)
		}
		final := h.plat.shown(cards[0].ref.ID)
		if want := fmt.Sprintf("Step %d ", steps+1); final.Text != "Done" || !strings.HasPrefix(final.Footer, want) {
			t.Errorf("final card = %q %q, want Done and %q", final.Text, final.Footer, want)
		}
		if n := step.calls.Load(); n != steps {
			t.Errorf("tool ran %d times, want %d", n, steps)
		}
	})
}

func TestRateLimitIsHonoured(t *testing.T) {
	bubble(t, func(t *testing.T) {
		step := &tool{name: "step", risk: agent.RiskSafe, out: "ok", delay: 3 * time.Second}
		h := newHarness(t, bot.Config{}, step)
		var limitedAt time.Time
		h.plat.fail = func(o op) error {
			if o.kind == "update" && o.ref.Thread.Channel == "C1" && limitedAt.IsZero() {
				limitedAt = o.at
				return &bot.RateLimitError{RetryAfter: 30 * time.Second}
			}
			return nil
		}
		h.model.add(use("step", `{"q":"1"}`), say("first done"), say("second done"))
		h.mention(ann, "slow work in C1")
		time.Sleep(10 * time.Second)
		other := bot.ThreadRef{Platform: "test", Channel: "C2", Thread: "T2"}
		h.event(bot.Event{Kind: bot.EventMention, Thread: other, User: bob, Text: "quick work in C2"})
		h.settle()

		if limitedAt.IsZero() {
			t.Fatal("no update to C1 was attempted")
		}
		var after []op
		for _, o := range h.plat.callsTo("C1") {
			if o.at.After(limitedAt) {
				after = append(after, o)
			}
		}
		if len(after) == 0 {
			t.Fatal("C1 was never called again after its 429")
		}
		if after[0].at.Sub(limitedAt) < 30*time.Second {
			t.Fatalf("C1 was called again %v after a 429 asking for 30s", after[0].at.Sub(limitedAt))
		}
		if after[0].err != nil || after[0].kind != "update" {
			t.Errorf("the retry after the wait = %+v, want the card edit, succeeding", after[0])
		}
		var flowed bool
		for _, o := range h.plat.callsTo("C2") {
			if o.at.After(limitedAt) && o.at.Before(limitedAt.Add(30*time.Second)) && o.msg.Kind == bot.KindAnswer {
				flowed = true
			}
		}
		if !flowed {
			t.Error("C2 did not get its answer while C1 waited out its rate limit")
		}
		c1 := h.plat.callsTo("C1")
		if card := h.plat.shown(c1[0].ref.ID); card.Text != "Done" {
			t.Errorf("C1's card shows %q, want Done", card.Text)
		}
	})
}

func TestFailingPlatformBacksOffThenDrops(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.plat.fail = func(o op) error {
			if o.msg.Kind == bot.KindAnswer {
				return fmt.Errorf("connection reset")
			}
			if o.msg.Kind == bot.KindStatus && o.kind == "update" {
				return &bot.PermanentError{Err: fmt.Errorf("message deleted")}
			}
			return nil
		}
		h.model.add(say("an answer that never arrives"))
		h.mention(ann, "try")
		h.settle()

		var answers []op
		for _, o := range h.plat.callsTo("C1") {
			if o.msg.Kind == bot.KindAnswer {
				answers = append(answers, o)
			}
		}
		if len(answers) != 8 {
			t.Fatalf("answer tried %d times, want 8 and then dropped", len(answers))
		}
		for i := 1; i < len(answers); i++ {
			gap := answers[i].at.Sub(answers[i-1].at)
			want := min(time.Second<<(i-1), 2*time.Minute)
			if gap < want {
				t.Errorf("retry %d came %s after the last, want a backoff of at least %s", i, gap, want)
			}
		}
		var edits int
		for _, o := range h.plat.callsTo("C1") {
			if o.kind == "update" {
				edits++
			}
		}
		// The card is edited at most once: a permanent refusal is dropped, never retried. (It
		// may not be edited at all when the run finished before the card was first posted,
		// since the card is rendered from the latest state.)
		if edits > 1 {
			t.Errorf("%d edits of a card the platform refused for good, want at most 1", edits)
		}
	})
}

func TestSecretsAreNeverPosted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const (
			slackToken = "xoxb-123456789012-abcdefghijklmnop"
			openaiKey  = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
			configured = "hunter2-correct-horse"
		)
		env := &tool{name: "env", risk: agent.RiskSafe, out: "SLACK_BOT_TOKEN=" + slackToken}
		leak := &tool{name: "leak", risk: agent.RiskConfirm, out: "ok"}
		h := newHarness(t, bot.Config{Redact: []string{configured}}, env, leak)
		h.model.add(
			use("update_plan", `{"plan":[{"step":"read `+configured+`","status":"in_progress"}]}`),
			use("env", `{}`),
			use("leak", `{"q":"`+openaiKey+`"}`),
			say("The token is "+slackToken+", the key "+openaiKey+" and the password "+configured+"."),
		)
		h.mention(ann, "find the password "+configured)
		h.settle()
		approve, _ := h.buttons()
		h.click(ann, approve.ID)
		h.settle()
		status := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandStatus, User: ann})

		sent := h.plat.allText() + status.Notice
		for _, secret := range []string{slackToken, openaiKey, configured} {
			if strings.Contains(sent, secret) {
				t.Errorf("%q was posted", secret)
			}
		}
		if !strings.Contains(sent, "[redacted]") || len(h.plat.sent(bot.KindAnswer)) != 1 {
			t.Errorf("the answer with its secrets redacted was not posted")
		}
		if !h.model.saw(agent.RoleTool, slackToken) {
			t.Error("the model did not get the tool's output: redaction is for what is posted only")
		}
	})
}

func TestStopFlushesTheOutbox(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(say("The answer."))
		h.mention(ann, "answer me")
		synctest.Wait()
		if n := len(h.plat.sent(bot.KindAnswer)); n != 0 {
			t.Fatalf("answer posted before the pacing allowed it")
		}
		if err := h.bot.Stop(t.Context()); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if n := len(h.plat.sent(bot.KindAnswer)); n != 1 {
			t.Errorf("%d answers posted by the time Stop returned, want 1", n)
		}
	})
}

// TestStopGivesUpWhenItsContextEnds stops the bot while its answer waits out a rate limit:
// Stop gives up when its context ends, and the next process posts the answer, no sooner than
// the platform's Retry-After allows, since the hold is stored.
func TestStopGivesUpWhenItsContextEnds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		var limitedAt time.Time
		h.plat.fail = func(o op) error {
			if o.msg.Kind == bot.KindAnswer {
				limitedAt = o.at
				return &bot.RateLimitError{RetryAfter: 10 * time.Minute}
			}
			return nil
		}
		h.model.add(say("The answer."))
		h.mention(ann, "answer me")
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := h.bot.Stop(ctx); err == nil {
			t.Error("Stop reported a flushed outbox while an answer waited out a rate limit")
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Stop took %s, past its context's deadline", took)
		}

		h.plat.fail = nil
		h.restart()
		h.settle()
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 1 {
			t.Fatalf("%d answers posted after the restart, want the one left in the outbox", len(answers))
		}
		if wait := answers[0].at.Sub(limitedAt); wait < 10*time.Minute {
			t.Errorf("the answer was posted %s after a 429 asking for 10m", wait)
		}
		// The platform refused the first post, so the answer does not repeat one.
		if strings.Contains(answers[0].msg.Footer, "may repeat") {
			t.Errorf("the answer's footer says %q, want no note: the platform refused the first post", answers[0].msg.Footer)
		}
	})
}
