package bot_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// "@loopbot sanity" in a working run's thread runs the sanity check at the next step: the
// reviewer is told who asked, the executor never reads the request, and the verdict is
// posted in the thread.
func TestSanityOnDemandInThread(t *testing.T) {
	bubble(t, func(t *testing.T) {
		slow := &tool{name: "slow", risk: agent.RiskSafe, out: "half done", delay: 10 * time.Second}
		h := newHarness(t, bot.Config{}, slow)
		h.sanity = newModel(t)
		h.restart()
		h.sanity.add(say(`{"verdict":"concerns","note":"The run has not checked the backups yet."}`))
		h.model.add(use("slow", `{"q":"a"}`), use("slow", `{"q":"b"}`), say("migrated"))
		res := h.mention(ann, "migrate the database")
		synctest.Wait()
		got := h.mention(bob, "sanity")
		if got.RunID != res.RunID || got.Notice != "The sanity check runs at the run's next step; its verdict is posted here." {
			t.Fatalf("sanity = %+v", got)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		reqs := h.sanity.requests()
		if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[1].Content, "because bob asked for it in the thread") ||
			!strings.Contains(reqs[0].Messages[1].Content, "Goal: migrate the database") {
			t.Fatalf("the reviewer was sent %+v", reqs)
		}
		if h.model.saw(agent.RoleUser, "sanity check") {
			t.Fatal("the executor was sent the sanity request")
		}
		if !h.model.saw(agent.RoleUser, "has not checked the backups") {
			t.Fatal("the reviewer's concern did not reach the executor")
		}
		want := "Sanity check at step 1 (bob asked for it in the thread): concerns. The run has not checked the backups yet."
		if !strings.Contains(h.plat.allText(), want) {
			t.Fatalf("the thread does not show the verdict %q:\n%s", want, h.plat.allText())
		}
		if n := strings.Count(h.plat.allText(), "Sanity check at step"); n != 1 {
			t.Fatalf("the verdict was posted %d times", n)
		}
		// With nothing running, it says so.
		if got := h.mention(bob, "sanity"); got.Notice != "Nothing is running in this thread." {
			t.Fatalf("sanity with no run = %+v", got)
		}
	})
}

// Without a model to review with, asking for a sanity check says so.
func TestSanityWithoutAModel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, _ := workingRun(t, "done")
		if got := h.mention(ann, "sanity"); !strings.HasPrefix(got.Notice, "No model is configured to review") {
			t.Fatalf("sanity = %+v", got)
		}
		h.settle()
	})
}
