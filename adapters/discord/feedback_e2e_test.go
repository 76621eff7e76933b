package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// TestE2ERateAnswer: the answer carries 👍 / 👎 buttons; a click on one through Discord's
// interaction is stored as the clicker's rating and answered with an ephemeral thanks.
func TestE2ERateAnswer(t *testing.T) {
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)}, llmtest.Text("The answer is 42."))
	e.start(t)
	_, thread := e.slash(t, "find the answer")
	var ans discordfake.Message
	waitUntil(t, "the answer", func() bool { var ok bool; ans, ok = e.answer(thread, "The answer is 42."); return ok })
	ids := buttonIDs(ans)
	up := ids["👍 Helpful"]
	if up == "" || ids["👎 Not helpful"] == "" {
		t.Fatalf("answer buttons %v, want 👍 Helpful and 👎 Not helpful", ids)
	}
	token := e.click(t, thread, ans.ID, up, discordfake.UserID)
	fu := e.f.WaitFor(t, "the rating's notice", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+token)) == 1
	})
	if n := discordfake.Find(fu, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+token)[0]; !strings.Contains(n.Body["content"].(string), "helpful") || n.Body["flags"] != float64(64) {
		t.Errorf("rating told %+v, want an ephemeral thanks", n.Body)
	}
	var rated []*bot.Feedback
	err := e.db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		rated, err = tx.Feedback("")
		return err
	})
	if err != nil || len(rated) != 1 || rated[0].Value != bot.FeedbackUp || rated[0].User.ID != discordfake.UserID || rated[0].Thread.Platform != "discord" {
		t.Errorf("stored ratings %+v (%v), want one up by the clicker", rated, err)
	}
}
