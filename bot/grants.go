package bot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// Grants on the bot's side. An approval card offers Approve once, Approve for this run (the
// grant is kept in the run's state, agent/grant.go) and, for approvers, Always allow here: a
// ChannelGrant kept in the store for the channel, with the call's argument pattern as the card
// showed it. The scheduler hands a run its channel's grants (scheduler.channelGrants), and the
// loop decides which call a grant covers. A dangerous call is approved once or not at all:
// its card has no grant buttons, and a grant click on it is refused. "grants" lists the
// channel's grants with Revoke buttons, which only approvers may use. Every grant, every
// use and every revoke is an audit entry of the run it came from or the run that used it.

// CommandGrants lists the channel's grants.
const CommandGrants = "grants"

// ChannelGrant is a grant for every run of one channel ("Always allow here").
type ChannelGrant struct {
	// Channel is ThreadRef.ChannelKey of the channel it is for.
	Channel string      `json:"channel"`
	Grant   agent.Grant `json:"grant"`
	// RunID is the run whose approval card made it.
	RunID string `json:"run_id"`
	// RevokeAction is the opaque ID of its Revoke button.
	RevokeAction string `json:"revoke_action"`
}

// ID is the grant's ID, its key in the store.
func (g *ChannelGrant) ID() string { return g.Grant.ID }

// Notices of grants.
const (
	noticeOnceOnly     = "This call is dangerous: it can be approved once only, not granted."
	noticeAlwaysNeeds  = "Only loopbot's approvers can allow a call always in this channel."
	noticeNoPattern    = "This call has no pattern that can be allowed always; approve it once or for this run."
	noticeRevokeNeeds  = "Only loopbot's approvers can revoke a grant."
	noticeGrantRevoked = "Revoked."
	noticeGrantGone    = "That grant was already revoked."
)

// maxReason bounds a rejection's reason: it is said to the model and kept in the audit log.
const maxReason = 1000

// refuseGrant says why who may not settle ap with a grant of scope, or "" if they may. It
// comes on top of refuseDecision.
func (p Policy) refuseGrant(ap *Approval, who User, scope agent.GrantScope) string {
	switch {
	case scope == "":
		return ""
	case ap.Risk >= agent.RiskDangerous:
		return noticeOnceOnly
	case scope == agent.GrantChannel && !slices.Contains(p.Approvers, who.ID):
		return noticeAlwaysNeeds
	case scope == agent.GrantChannel && ap.Pattern == "":
		return noticeNoPattern
	}
	return ""
}

// grantScope is the scope of grant a click asks for, if any.
func grantScope(k ActionKind) agent.GrantScope {
	switch k {
	case ActionApproveRun:
		return agent.GrantRun
	case ActionApproveAlways:
		return agent.GrantChannel
	}
	return ""
}

// grantActions adds the grant and Reject-and-stop actions to a new approval request for call
// c. A dangerous call, and one the data-flow guard holds, get none of the grant actions.
func (r *records) grantActions(tx Tx, ap *Approval, c agent.CallRecord) error {
	ap.RejectStopAction = r.newID()
	acts := map[string]ActionKind{ap.RejectStopAction: ActionRejectStop}
	ap.FlowHeld = c.FlowHeld
	if ap.Risk < agent.RiskDangerous && !c.FlowHeld {
		ap.RunGrantAction = r.newID()
		acts[ap.RunGrantAction] = ActionApproveRun
		if c.GrantPattern != "" {
			ap.Pattern = c.GrantPattern
			ap.AlwaysAction = r.newID()
			acts[ap.AlwaysAction] = ActionApproveAlways
		}
	}
	for id, kind := range acts {
		if err := tx.PutAction(&Action{ID: id, Kind: kind, RunID: ap.RunID, ApprovalID: ap.ID}); err != nil {
			return err
		}
	}
	return nil
}

// grant makes the grant a verdict asks for, while its approval is settled: for the run, in
// the run's state; for the channel, in the store. The caller has checked refuseGrant.
func (r *records) grant(tx Tx, rec *RunRecord, ap *Approval, c *agent.CallRecord, v verdict, now time.Time) error {
	if v.grant == "" || v.outcome != ApprovalApproved {
		return nil
	}
	var g agent.Grant
	switch v.grant {
	case agent.GrantRun:
		var err error
		if g, err = rec.State.GrantRun(c, r.newID(), displayName(v.by), now); err != nil {
			return err
		}
	case agent.GrantChannel:
		g = agent.Grant{ID: r.newID(), Scope: agent.GrantChannel, Tool: ap.Tool, Pattern: ap.Pattern, MaxRisk: ap.Risk, By: displayName(v.by), At: now.UTC()}
		cg := &ChannelGrant{Channel: rec.Thread.ChannelKey(), Grant: g, RunID: rec.ID, RevokeAction: r.newID()}
		if err := tx.PutAction(&Action{ID: cg.RevokeAction, Kind: ActionRevoke, GrantID: g.ID}); err != nil {
			return err
		}
		if err := tx.PutGrant(cg); err != nil {
			return err
		}
	}
	ap.Granted = v.grant
	return tx.AppendAudit(AuditEntry{At: now, Actor: v.by, Action: "grant_" + string(v.grant), RunID: rec.ID,
		ApprovalID: ap.ID, CallID: ap.CallID, Tool: ap.Tool, ArgsHash: ap.ArgsHash, Detail: g.ID + ": " + g.Describe()})
}

// auditGrantUses writes an audit entry for each call of the state's current step that a
// grant let run and that the stored state did not have so yet.
func (r *records) auditGrantUses(tx Tx, st *agent.State) error {
	var used []agent.CallRecord
	// Calls are in step order: only the tail of the current step is looked at.
	for i := len(st.Calls) - 1; i >= 0 && st.Calls[i].Step == st.Step; i-- {
		if c := st.Calls[i]; c.GrantedBy != nil {
			used = append(used, c)
		}
	}
	if len(used) == 0 {
		return nil
	}
	stored, err := tx.RunBrief(st.RunID)
	if err != nil {
		return err
	}
	for _, c := range used {
		if old := stored.State.Call(c.ID); old != nil && old.GrantedBy != nil {
			continue
		}
		g := c.GrantedBy
		if err := tx.AppendAudit(AuditEntry{At: r.clock.stamp(), Actor: loopbot, Action: "grant_use", RunID: st.RunID,
			CallID: c.ID, Tool: c.Name, ArgsHash: c.ArgsHash, Detail: g.ID + " (" + string(g.Scope) + ", by " + g.By + "): " + g.Describe}); err != nil {
			return err
		}
	}
	return nil
}

// channelGrants returns the function through which the loop reads the grants of thread's
// channel, at most once a step, so a revoke counts from the next step of every run.
func (s *scheduler) channelGrants(thread ThreadRef) func(ctx context.Context) ([]agent.Grant, error) {
	return func(ctx context.Context) ([]agent.Grant, error) {
		var out []agent.Grant
		err := s.store.View(ctx, func(tx Tx) error {
			out = nil
			gs, err := tx.Grants(thread.ChannelKey())
			for _, g := range gs {
				out = append(out, g.Grant)
			}
			return err
		})
		return out, err
	}
}

// listGrants posts the channel's grants, with Revoke buttons, to the thread the command came
// from; a channel without grants gets a list that says so and how grants are made (a Slack
// /loopbot grants has posted a root message for it to go under).
func (b *Bot) listGrants(ctx context.Context, ev Event) (Result, error) {
	err := b.store.Update(ctx, func(tx Tx) error {
		return b.recs.put(tx, ev.Thread, b.clock.stamp(), grantsItem(b.recs.newID(), ev.Thread))
	})
	return Result{}, err
}

// grantsItem posts the list of the thread's channel's grants; id makes it a post of its own.
func grantsItem(id string, thread ThreadRef) OutboxItem {
	return OutboxItem{Key: "grants/" + id, Kind: OutboxGrants, Text: thread.ChannelKey()}
}

// revoke removes the channel grant act names, for an approver, from the grant's channel.
func (b *Bot) revoke(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	var res Result
	err := b.store.Update(ctx, func(tx Tx) error {
		res = Result{}
		g, err := tx.Grant(act.GrantID)
		if errors.Is(err, ErrNotFound) {
			res.Notice = noticeGrantGone
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case g.Channel != from.ChannelKey():
			b.log.Warn("revoke from another channel refused", "grant", g.ID(), "user", who.ID, "from", from.Key())
			res.Notice = noticeOtherThread
			return nil
		case !slices.Contains(b.cfg.Policy.Approvers, who.ID):
			res.Notice = noticeRevokeNeeds
			return nil
		}
		if err := tx.DeleteGrant(g.ID()); err != nil {
			return err
		}
		now := b.clock.stamp()
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "revoke", RunID: g.RunID, Tool: g.Grant.Tool,
			Detail: g.ID() + ": " + g.Grant.Describe()}); err != nil {
			return err
		}
		res.Notice = noticeGrantRevoked
		text := displayName(who) + " revoked the grant for " + g.Grant.Describe() + "."
		return b.recs.put(tx, from, now, noticeItem("", b.recs.newID(), text))
	})
	return res, err
}

// grantsMessage lists a channel's grants with their Revoke buttons.
func grantsMessage(gs []*ChannelGrant) Message {
	m := Message{Kind: KindGrants, Title: "Grants in this channel"}
	if len(gs) == 0 {
		m.Text = "None: every call that needs approval asks. Approval cards offer Approve for this run and, to approvers, Always allow here."
		return m
	}
	m.Text = "Calls these cover run without asking, in every run of this channel. Dangerous calls always ask."
	for _, g := range gs {
		m.Fields = append(m.Fields, Field{Name: g.Grant.Tool + " " + g.Grant.Pattern,
			Value: "up to " + g.Grant.MaxRisk.String() + ", by " + g.Grant.By + " on " + g.Grant.At.UTC().Format("2006-01-02")})
		m.Buttons = append(m.Buttons, Button{ID: g.RevokeAction, Label: clip("Revoke "+strings.TrimSpace(g.Grant.Tool+" "+g.Grant.Pattern), 75), Style: StyleDanger})
	}
	return m
}

// clipReason bounds a rejection's reason.
func clipReason(s string) string { return clip(strings.TrimSpace(s), maxReason) }

// approvalChoices is the text and buttons of a pending approval card: Approve once, and for a
// call below dangerous Approve for this run and (when it has a pattern) Always allow here;
// Reject and Reject and stop, both asking for a reason.
func approvalChoices(ap *Approval) (string, []Button) {
	text := "The run wants to call " + ap.Tool + ". Approve once runs it once with exactly these arguments."
	once := Button{ID: ap.ApproveAction, Label: "Approve once", Style: StylePrimary}
	buttons := []Button{once}
	switch {
	case ap.Risk >= agent.RiskDangerous:
		buttons[0].Confirm = "This call is dangerous. Run " + ap.Tool + " with these arguments?"
		text += " A dangerous call can be approved once only."
	case ap.FlowHeld:
		text += " A call that could send data out of a run that read outside content can be approved once only."
	}
	if ap.RunGrantAction != "" {
		buttons = append(buttons, Button{ID: ap.RunGrantAction, Label: "Approve for this run"})
		text += " Approve for this run also lets later " + ap.Tool + " calls at risk " + ap.Risk.String() + " or lower run without asking."
	}
	if ap.AlwaysAction != "" {
		buttons = append(buttons, Button{ID: ap.AlwaysAction, Label: "Always allow here"})
		text += " Always allow here (approvers only) lets " + ap.Tool + " " + ap.Pattern + " run in this channel until revoked."
	}
	buttons = append(buttons, Button{ID: ap.RejectAction, Label: "Reject", Style: StyleDanger, Reason: ReasonLabel})
	if ap.RejectStopAction != "" {
		buttons = append(buttons, Button{ID: ap.RejectStopAction, Label: "Reject and stop", Style: StyleDanger, Reason: ReasonLabel})
	}
	return text, buttons
}
