package bot

import (
	"slices"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// The rules of who may do what are methods of Policy: they read only the policy and what
// they are given, no store and no clock, so Handle applies them inside its transactions.

// refuseDecision says why who may not decide on ap now, or "" if they may.
func (p Policy) refuseDecision(ap *Approval, who User, approve bool, now time.Time) string {
	when := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
	switch ap.Status {
	case ApprovalApproved:
		return "Already approved by " + displayName(ap.DecidedBy) + " at " + when(ap.DecidedAt) + "."
	case ApprovalRejected:
		return "Already rejected by " + displayName(ap.DecidedBy) + " at " + when(ap.DecidedAt) + "."
	case ApprovalExpired:
		return "This request expired at " + when(ap.DecidedAt) + "; the call was not run."
	case ApprovalCancelled:
		return "The run was cancelled; this request is closed."
	}
	if !now.Before(ap.ExpiresAt) {
		return "This request expired at " + when(ap.ExpiresAt) + "; the call will not run."
	}
	requester := who.ID == ap.Requester.ID
	approver := slices.Contains(p.Approvers, who.ID)
	var allowed bool
	switch p.ApproveBy {
	case ApproveByApprovers:
		allowed = approver
	case ApproveByChannel:
		allowed = approver || p.userAllowed(who)
	default:
		allowed = approver || requester
	}
	// Saying no to one's own run is always allowed: it can only make the run do less.
	if !approve && requester {
		allowed = true
	}
	if !allowed {
		return "You are not allowed to decide on this request. " + p.whoDecides(ap)
	}
	if approve && requester && ap.Risk >= agent.RiskDangerous && p.dangerousNeedsOther() {
		return "This call is dangerous: someone other than the person who started the run must approve it."
	}
	return ""
}

// mayStart applies the channel and user allowlists.
func (p Policy) mayStart(ev Event) bool {
	return (len(p.AllowedChannels) == 0 || slices.Contains(p.AllowedChannels, ev.Thread.Channel)) && p.userAllowed(ev.User)
}

// userAllowed applies the user allowlist.
func (p Policy) userAllowed(u User) bool {
	return len(p.AllowedUsers) == 0 || slices.Contains(p.AllowedUsers, u.ID)
}

// mayControl says whether who may cancel or continue rec: its requester, an approver, or
// anyone allowed to use the bot when approvals are the channel's business.
func (p Policy) mayControl(rec *RunRecord, who User) bool {
	return who.ID == rec.Requester.ID || slices.Contains(p.Approvers, who.ID) ||
		p.ApproveBy == ApproveByChannel && p.userAllowed(who)
}

// whoDecides says who may decide on ap, so that a refused clicker knows whom to ask.
func (p Policy) whoDecides(ap *Approval) string {
	switch p.ApproveBy {
	case ApproveByApprovers:
		return "Only loopbot's approvers can."
	case ApproveByChannel:
		return "Only people allowed to use loopbot here can."
	}
	if len(p.Approvers) > 0 {
		return "Only " + displayName(ap.Requester) + ", who started the run, or one of loopbot's approvers can."
	}
	return "Only " + displayName(ap.Requester) + ", who started the run, can."
}
