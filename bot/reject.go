package bot

import (
	"time"
)

// Reject with a reason, and Reject and stop. Whoever may reject a call may also stop its run:
// the requester, an approver, or anyone allowed to use the bot when approvals are the
// channel's business, which are exactly who may cancel (Policy.mayControl). A rejection's reason is typed into the field
// the Reject buttons ask for (Button.Reason: a modal on Slack and Discord, a field in the
// console) and reaches the model with the rejection (agent.State.Decide); a platform that
// cannot ask sends a plain Reject. Reject and stop rejects the call and then cancels the run,
// with the reason in the audit log and the thread.

// ReasonLabel is the label of the reason field of the Reject buttons, which an adapter that
// draws the field itself uses too.
const ReasonLabel = "Why? (optional; the model reads this)"

// rejectStop cancels the run of ap, whose call who has just rejected, in the transaction of
// the rejection.
func (r *records) rejectStop(tx Tx, ap *Approval, who User, reason string, now time.Time) error {
	rec, err := tx.Run(ap.RunID)
	if err != nil || rec.Status.Terminal() {
		return err
	}
	if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "reject_stop", RunID: rec.ID,
		ApprovalID: ap.ID, CallID: ap.CallID, Tool: ap.Tool, Detail: reason}); err != nil {
		return err
	}
	text := "Rejected and stopped by " + displayName(who) + "."
	if reason != "" {
		text += " Reason: " + reason
	}
	return r.cancel(tx, rec, text, now)
}
