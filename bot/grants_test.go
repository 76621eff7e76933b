package bot_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// grantTool is a test tool whose channel-grant pattern is the first word of its q argument.
type grantTool struct{ *tool }

func (g grantTool) GrantPattern(raw json.RawMessage) (string, bool) {
	var a struct{ Q string }
	if json.Unmarshal(raw, &a) != nil || strings.TrimSpace(a.Q) == "" {
		return "", false
	}
	return strings.Fields(a.Q)[0], true
}

func (g grantTool) GrantCovers(pattern string, raw json.RawMessage) bool {
	p, ok := g.GrantPattern(raw)
	return ok && p == pattern
}

// auditActions lists the actions of a run's audit entries, in order.
func (h *harness) auditActions(runID string) []string {
	h.t.Helper()
	var out []string
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		es, err := tx.Audit(runID)
		for _, e := range es {
			out = append(out, e.Action)
		}
		return err
	})
	if err != nil {
		h.t.Fatalf("audit: %v", err)
	}
	return out
}

// clickWith clicks a button with text typed in its reason field.
func (h *harness) clickWith(u bot.User, actionID, text string) bot.Result {
	h.t.Helper()
	return h.event(bot.Event{Kind: bot.EventAction, User: u, ActionID: actionID, Text: text})
}

// hasButton reports whether the latest approval card has a button labelled label.
func (h *harness) hasButton(label string) bool {
	cards := h.plat.sent(bot.KindApproval)
	if len(cards) == 0 {
		return false
	}
	return slices.ContainsFunc(h.plat.shown(cards[len(cards)-1].ref.ID).Buttons, func(b bot.Button) bool { return b.Label == label })
}

// Approve for this run lets later calls of the tool at the same risk run without asking, in
// that run only; the grant and its use are audited.
func TestGrantForTheRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, grantTool{op})
		h.model.add(use("op", `{"q":"make one"}`), use("op", `{"q":"rm two"}`), say("finished"))
		res := h.mention(ann, "do two things")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if got := h.click(ann, h.button("Approve for this run").ID); got.Notice != "" {
			t.Fatalf("approve for run: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if n := op.calls.Load(); n != 2 {
			t.Fatalf("tool ran %d times, want 2 (the second under the run's grant)", n)
		}
		if n := len(h.approvals(res.RunID)); n != 1 {
			t.Fatalf("%d approvals, want 1", n)
		}
		if got := h.auditActions(res.RunID); !slices.Contains(got, "grant_run") || !slices.Contains(got, "grant_use") {
			t.Fatalf("audit %v lacks the grant or its use", got)
		}

		// The next run of the thread asks again: a run's grant ends with it.
		h.model.add(use("op", `{"q":"make three"}`))
		next := h.mention(ann, "once more")
		h.settle()
		h.wantStatus(next.RunID, agent.StatusAwaitingApproval)
	})
}

// Always allow here is for approvers only; it outlives a restart, covers its pattern in
// later runs of the channel and nothing else, is listed by "grants", and only an approver
// may revoke it.
func TestGrantAlwaysAndRevoke(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, grantTool{op})
		h.model.add(use("op", `{"q":"make one"}`), say("first done"))
		res := h.mention(ann, "build it")
		h.settle()
		always := h.button("Always allow here")
		if got := h.click(ann, always.ID); !strings.Contains(got.Notice, "Only loopbot's approvers") {
			t.Fatalf("requester's always click: notice %q, want refused", got.Notice)
		}
		if op.calls.Load() != 0 {
			t.Fatal("the call ran on a refused always click")
		}
		if got := h.click(boss, always.ID); got.Notice != "" {
			t.Fatalf("approver's always click: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if got := h.auditActions(res.RunID); !slices.Contains(got, "grant_channel") {
			t.Fatalf("audit %v lacks the channel grant", got)
		}
		h.restart()

		// A later run: the pattern runs unasked, another pattern asks.
		h.model.add(use("op", `{"q":"make two"}`), use("op", `{"q":"curl three"}`))
		second := h.mention(ann, "again")
		h.settle()
		h.wantStatus(second.RunID, agent.StatusAwaitingApproval)
		if n := op.calls.Load(); n != 2 {
			t.Fatalf("tool ran %d times, want 2 (make two under the channel grant)", n)
		}
		if got := h.auditActions(second.RunID); !slices.Contains(got, "grant_use") {
			t.Fatalf("audit %v lacks the grant's use", got)
		}
		h.model.add(say("second done"))
		h.click(ann, h.button("Reject").ID)
		h.settle()

		// The list, and its Revoke button.
		h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandGrants, User: ann})
		h.settle()
		lists := h.plat.sent(bot.KindGrants)
		if len(lists) != 1 || len(lists[0].msg.Buttons) != 1 || !strings.Contains(lists[0].msg.Fields[0].Name, "op make") {
			t.Fatalf("grants list %+v", lists)
		}
		revoke := lists[0].msg.Buttons[0].ID
		if got := h.click(ann, revoke); got.Notice != "Only loopbot's approvers can revoke a grant." {
			t.Fatalf("requester's revoke: notice %q", got.Notice)
		}
		elsewhere := bot.ThreadRef{Platform: thread.Platform, Channel: "C2", Thread: "T9"}
		if got := h.event(bot.Event{Kind: bot.EventAction, Thread: elsewhere, User: boss, ActionID: revoke}); got.Notice != "This button belongs to another thread." {
			t.Fatalf("revoke from another channel: notice %q", got.Notice)
		}
		if got := h.click(boss, revoke); got.Notice != "Revoked." {
			t.Fatalf("approver's revoke: notice %q", got.Notice)
		}
		h.settle()
		if got := h.auditActions(res.RunID); !slices.Contains(got, "revoke") {
			t.Fatalf("audit %v lacks the revoke", got)
		}
		h.model.add(use("op", `{"q":"make four"}`))
		third := h.mention(ann, "and again")
		h.settle()
		h.wantStatus(third.RunID, agent.StatusAwaitingApproval)
		h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandGrants, User: ann})
		h.settle()
		lists = h.plat.sent(bot.KindGrants)
		if last := lists[len(lists)-1].msg; len(last.Buttons) != 0 || !strings.HasPrefix(last.Text, "None") {
			t.Fatalf("grants after the revoke: %+v", last)
		}
	})
}

// A dangerous call is approved once or not at all: its card has no grant buttons, and a
// grant click bound to it (forged into the store) is refused without running the call.
func TestDangerousIsApprovedOnceOnly(t *testing.T) {
	for _, kind := range []bot.ActionKind{bot.ActionApproveRun, bot.ActionApproveAlways} {
		t.Run(string(kind), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				op := &tool{name: "op", risk: agent.RiskDangerous, out: "done"}
				h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, grantTool{op})
				h.model.add(use("op", `{"q":"make one"}`), say("done"))
				res := h.mention(ann, "risky")
				h.settle()
				if h.hasButton("Approve for this run") || h.hasButton("Always allow here") {
					t.Fatal("a dangerous call's card offers a grant")
				}
				ap := h.approvals(res.RunID)[0]
				err := h.db.Update(context.Background(), func(tx bot.Tx) error {
					return tx.PutAction(&bot.Action{ID: "forged", Kind: kind, RunID: res.RunID, ApprovalID: ap.ID})
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := h.click(boss, "forged"); !strings.Contains(got.Notice, "approved once only") {
					t.Fatalf("forged grant click: notice %q", got.Notice)
				}
				h.settle()
				if op.calls.Load() != 0 || h.approvals(res.RunID)[0].Status != bot.ApprovalPending {
					t.Fatal("a forged grant click decided a dangerous call")
				}
			})
		})
	}
}

// Always allow here needs a pattern: a tool that draws none gets no such button, and a
// forged one is refused.
func TestAlwaysNeedsAPattern(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, op)
		h.model.add(use("op", `{"q":"make one"}`), say("done"))
		res := h.mention(ann, "build it")
		h.settle()
		if h.hasButton("Always allow here") || !h.hasButton("Approve for this run") {
			t.Fatal("a call without a pattern: wrong grant buttons")
		}
		ap := h.approvals(res.RunID)[0]
		err := h.db.Update(context.Background(), func(tx bot.Tx) error {
			return tx.PutAction(&bot.Action{ID: "forged", Kind: bot.ActionApproveAlways, RunID: res.RunID, ApprovalID: ap.ID})
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.click(boss, "forged"); !strings.Contains(got.Notice, "no pattern") {
			t.Fatalf("forged always click: notice %q", got.Notice)
		}
		if op.calls.Load() != 0 {
			t.Fatal("the call ran on a refused grant")
		}
	})
}

// A rejection's reason reaches the model.
func TestRejectReasonReachesTheModel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{"q":"prod"}`), say("ok, staging then"))
		res := h.mention(ann, "deploy")
		h.settle()
		if got := h.clickWith(ann, h.button("Reject").ID, "use the staging host instead"); got.Notice != "" {
			t.Fatalf("reject: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if !h.model.saw(agent.RoleTool, "use the staging host instead") {
			t.Fatal("the model's next request lacks the reason")
		}
		if ap := h.approvals(res.RunID)[0]; ap.Reason != "use the staging host instead" {
			t.Fatalf("approval reason %q", ap.Reason)
		}
	})
}

// Reject and stop rejects the call and ends the run, with the reason in the audit log.
func TestRejectAndStop(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{"q":"prod"}`), say("never asked"))
		res := h.mention(ann, "deploy")
		h.settle()
		if got := h.clickWith(ann, h.button("Reject and stop").ID, "wrong cluster"); got.Notice != "" {
			t.Fatalf("reject and stop: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
		if op.calls.Load() != 0 {
			t.Fatal("the rejected call ran")
		}
		if n := len(h.model.requests()); n != 1 {
			t.Fatalf("%d model requests, want 1: the run went on after it was stopped", n)
		}
		var detail string
		err := h.db.View(context.Background(), func(tx bot.Tx) error {
			es, err := tx.Audit(res.RunID)
			for _, e := range es {
				if e.Action == "reject_stop" {
					detail = e.Detail
				}
			}
			return err
		})
		if err != nil || detail != "wrong cluster" {
			t.Fatalf("reject_stop audit detail %q, %v", detail, err)
		}
		if st := h.run(res.RunID).State; !strings.Contains(st.Error, "wrong cluster") {
			t.Fatalf("run error %q lacks the reason", st.Error)
		}
	})
}

// A grant click on a call that no longer waits makes no grant: only a decision that took
// effect grants anything.
func TestGrantNeedsTheDecision(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, grantTool{op})
		h.model.add(use("op", `{"q":"make one"}`), say("done"))
		res := h.mention(ann, "build it")
		h.settle()
		always := h.button("Always allow here")
		ap := h.approvals(res.RunID)[0]
		err := h.db.Update(context.Background(), func(tx bot.Tx) error {
			rec, err := tx.Run(res.RunID)
			if err != nil {
				return err
			}
			rec.State.Call(ap.CallID).Status = agent.CallApproved
			return tx.PutRun(rec)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.click(boss, always.ID); got.Notice != "This run is not waiting for that any more." {
			t.Fatalf("always on a call that no longer waits: notice %q", got.Notice)
		}
		err = h.db.View(context.Background(), func(tx bot.Tx) error {
			gs, err := tx.Grants(thread.ChannelKey())
			if len(gs) != 0 {
				t.Errorf("grants %+v made without a decision", gs)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Approve once grants nothing: the next call of the tool asks again.
func TestApproveOnceGrantsNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, grantTool{op})
		h.model.add(use("op", `{"q":"make one"}`), use("op", `{"q":"make two"}`), say("finished"))
		res := h.mention(ann, "do two things")
		h.settle()
		h.click(ann, h.button("Approve once").ID)
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if n := len(h.approvals(res.RunID)); n != 2 || op.calls.Load() != 1 {
			t.Fatalf("%d approvals and %d calls, want the second call to ask", n, op.calls.Load())
		}
	})
}

// flowTestTool is a tool whose assessment says what it reads from outside and where it
// can send data.
type flowTestTool struct {
	tool
	reads, sends string
}

func (f *flowTestTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test", Reads: f.reads, Sends: f.sends, Carries: f.sends != ""}
}

// A call the data-flow guard holds is approved once only: its card offers no grant.
func TestFlowHeldIsApprovedOnceOnly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		read := &flowTestTool{tool: tool{name: "read", risk: agent.RiskSafe, out: "a page"}, reads: "https://page.example/x"}
		send := &flowTestTool{tool: tool{name: "send", risk: agent.RiskSafe, out: "sent"}, sends: "sink.example"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, read, send)
		h.model.add(use("read", `{"q":"page"}`), use("send", `{"q":"data"}`), say("done"))
		res := h.mention(ann, "read the page")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		aps := h.approvals(res.RunID)
		if len(aps) != 1 || aps[0].Tool != "send" || !aps[0].FlowHeld {
			t.Fatalf("approvals %+v, want the held send", aps)
		}
		if h.hasButton("Approve for this run") || h.hasButton("Always allow here") || !h.hasButton("Approve once") {
			t.Fatal("a held call's card offers a grant")
		}
	})
}
