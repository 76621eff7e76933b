package bot_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func TestApprovalClicks(t *testing.T) {
	no := false
	type click struct {
		who     bot.User
		button  string        // approve, reject or forged
		advance time.Duration // moved on the bot's clock before the click
		notice  string        // substring of the notice; empty wants none
	}
	tests := []struct {
		name      string
		policy    bot.Policy
		risk      agent.Risk
		clicks    []click
		wantCalls int32
		want      bot.ApprovalStatus
	}{
		{"requester approves", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: ann, button: "approve"}}, 1, bot.ApprovalApproved},
		{"double click", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: ann, button: "approve"}, {who: ann, button: "approve", notice: "Already approved by ann"}}, 1, bot.ApprovalApproved},
		{"approve after reject", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: ann, button: "reject"}, {who: ann, button: "approve", notice: "Already rejected by ann"}}, 0, bot.ApprovalRejected},
		{"late click", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: ann, button: "approve", advance: 31 * time.Minute, notice: "expired"}}, 0, bot.ApprovalPending},
		{"stranger", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: eve, button: "approve", notice: "not allowed"}, {who: eve, button: "reject", notice: "not allowed"}}, 0, bot.ApprovalPending},
		{"listed approver", bot.Policy{Approvers: []string{boss.ID}}, agent.RiskConfirm,
			[]click{{who: boss, button: "approve"}}, 1, bot.ApprovalApproved},
		{"dangerous approved by its requester", bot.Policy{Approvers: []string{boss.ID}}, agent.RiskDangerous,
			[]click{{who: ann, button: "approve", notice: "someone other than the person who started the run"}}, 0, bot.ApprovalPending},
		{"dangerous approved by another approver", bot.Policy{Approvers: []string{boss.ID}}, agent.RiskDangerous,
			[]click{{who: ann, button: "approve", notice: "someone other"}, {who: boss, button: "approve"}}, 1, bot.ApprovalApproved},
		{"dangerous by requester when allowed", bot.Policy{DangerousNeedsOther: &no}, agent.RiskDangerous,
			[]click{{who: ann, button: "approve"}}, 1, bot.ApprovalApproved},
		{"dangerous rejected by its requester", bot.Policy{}, agent.RiskDangerous,
			[]click{{who: ann, button: "reject"}}, 0, bot.ApprovalRejected},
		{"approvers only", bot.Policy{ApproveBy: bot.ApproveByApprovers, Approvers: []string{boss.ID}}, agent.RiskConfirm,
			[]click{{who: ann, button: "approve", notice: "not allowed"}, {who: boss, button: "approve"}}, 1, bot.ApprovalApproved},
		{"channel decides", bot.Policy{ApproveBy: bot.ApproveByChannel}, agent.RiskConfirm,
			[]click{{who: eve, button: "approve"}}, 1, bot.ApprovalApproved},
		{"forged button", bot.Policy{}, agent.RiskConfirm,
			[]click{{who: ann, button: "forged", notice: "This button is no longer valid."}}, 0, bot.ApprovalPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				op := &tool{name: "op", risk: tt.risk, out: "done"}
				h := newHarness(t, bot.Config{Policy: tt.policy}, op)
				h.model.add(use("op", `{"q":"x"}`), say("finished"))
				res := h.mention(ann, "do the op")
				h.settle()
				approve, reject := h.buttons()
				if tt.risk == agent.RiskDangerous && approve.Confirm == "" {
					t.Errorf("the Approve button of a dangerous call asks for no confirmation")
				}
				for _, c := range tt.clicks {
					h.clock.Advance(c.advance)
					id := map[string]string{"approve": approve.ID, "reject": reject.ID, "forged": approve.ID + "x"}[c.button]
					got := h.click(c.who, id)
					if c.notice == "" && got.Notice != "" || !strings.Contains(got.Notice, c.notice) {
						t.Errorf("%s clicks %s: notice %q, want %q", c.who.Name, c.button, got.Notice, c.notice)
					}
					h.settle()
				}
				if n := op.calls.Load(); n != tt.wantCalls {
					t.Errorf("tool ran %d times, want %d", n, tt.wantCalls)
				}
				aps := h.approvals(res.RunID)
				if len(aps) != 1 || aps[0].Status != tt.want {
					t.Fatalf("approvals = %+v, want one %s", aps, tt.want)
				}
				if tt.want == bot.ApprovalRejected && !h.model.saw(agent.RoleTool, "The user rejected this call") {
					t.Errorf("the model was not told of the rejection")
				}
			})
		})
	}
}

func TestApprovalExpires(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{"q":"x"}`), say("I could not run op."))
		res := h.mention(ann, "do the op")
		h.settle()
		approve, _ := h.buttons()

		time.Sleep(29 * time.Minute)
		h.settle()
		if aps := h.approvals(res.RunID); aps[0].Status != bot.ApprovalPending {
			t.Fatalf("approval %s before its deadline", aps[0].Status)
		}
		time.Sleep(2 * time.Minute)
		h.settle()

		h.wantStatus(res.RunID, agent.StatusCompleted)
		aps := h.approvals(res.RunID)
		if aps[0].Status != bot.ApprovalExpired || op.calls.Load() != 0 {
			t.Fatalf("approval %s, tool ran %d times; want expired and never run", aps[0].Status, op.calls.Load())
		}
		if !h.model.saw(agent.RoleTool, "approval expired") {
			t.Error("the model was not told the approval expired")
		}
		shown := h.plat.shown(h.plat.sent(bot.KindApproval)[0].ref.ID)
		if shown.Text != "Expired: not approved within 30m." || len(shown.Buttons) != 0 {
			t.Errorf("expired card = %+v", shown)
		}
		if got := h.click(ann, approve.ID); !strings.Contains(got.Notice, "expired") {
			t.Errorf("click on an expired card: notice %q", got.Notice)
		}
	})
}

func TestConcurrentClicksDecideOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, op)
		h.model.add(use("op", `{}`), say("finished"))
		res := h.mention(ann, "do the op")
		h.settle()
		approve, reject := h.buttons()

		var wg sync.WaitGroup
		notices := make([]string, 10)
		for i := range notices {
			who, id := ann, approve.ID
			if i%2 == 1 {
				who, id = boss, reject.ID
			}
			wg.Go(func() {
				got, err := h.bot.Handle(t.Context(), bot.Event{Kind: bot.EventAction, ID: fmt.Sprintf("click-%d", i), Thread: thread, User: who, ActionID: id})
				if err != nil {
					t.Errorf("click %d: %v", i, err)
				}
				notices[i] = got.Notice
			})
		}
		wg.Wait()
		h.settle()
		var decided int
		for _, n := range notices {
			if n == "" {
				decided++
			} else if !strings.HasPrefix(n, "Already ") {
				t.Errorf("losing click got notice %q", n)
			}
		}
		aps := h.approvals(res.RunID)
		if decided != 1 || aps[0].Status == bot.ApprovalPending {
			t.Fatalf("%d clicks decided, approval %s; want exactly one decision", decided, aps[0].Status)
		}
		wantCalls := int32(0)
		if aps[0].Status == bot.ApprovalApproved {
			wantCalls = 1
		}
		if n := op.calls.Load(); n != wantCalls {
			t.Errorf("tool ran %d times after the approval was %s", n, aps[0].Status)
		}
	})
}
