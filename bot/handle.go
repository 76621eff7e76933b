package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// errDuplicate rolls back the transaction of a delivery that was already claimed.
var errDuplicate = errors.New("duplicate delivery")

// What a person is told when an event changes nothing. They are short and safe: the
// details go to the log.
const (
	noticeNotAllowed   = "You are not allowed to start runs here."
	noticeNoGoal       = "Tell me what to do, for example: @loopbot summarise the open issues in this repo."
	noticeInvalid      = "This button is no longer valid."
	noticeNothingToRun = "Nothing is running in this thread."
	noticeEnded        = "This run has already ended."
	noticeNotWaiting   = "This run is not waiting for that any more."
	noticeNoControl    = "Only the person who started this run or an approver can do that."
	noticeCancelling   = "Cancelling the run."
)

// Handle takes one event from an adapter. It only reads and writes the store (never a model
// or a platform), so an adapter that acknowledges the platform first answers within its
// deadline. The Result's Notice is for the acting user alone; anything for the thread goes
// through the outbox.
//
// Every delivery is claimed in the store, so a platform retry is a Duplicate. A goal's claim
// commits in the same transaction as its run (or its place in the queue): a delivery the
// store failed to take leaves no claim behind, and its retry starts the run exactly once.
// Clicks and commands are claimed before they are handled; losing one of those to a store
// failure costs a second click, never a second effect.
func (b *Bot) Handle(ctx context.Context, ev Event) (Result, error) {
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		return Result{}, ErrStopped
	}
	if err := ev.Validate(); err != nil {
		return Result{}, fmt.Errorf("handle event: %w", err)
	}
	if b.platforms[ev.Thread.Platform] == nil {
		// Nothing could ever be posted back to the thread.
		return Result{}, fmt.Errorf("handle event %s: platform %q is not configured", ev.ID, ev.Thread.Platform)
	}
	if ev.User.Bot {
		return Result{}, nil
	}
	goal := ev.Kind != EventAction && (ev.Kind != EventCommand || (ev.Command != CommandStatus && ev.Command != CommandCancel))
	if !goal {
		first, err := b.store.ClaimEvent(ctx, ev.ID, b.now(), time.Duration(b.cfg.DedupeTTL))
		if err != nil {
			return Result{}, fmt.Errorf("claim event %s: %w", ev.ID, err)
		}
		if !first {
			return Result{Duplicate: true}, nil
		}
	}
	var res Result
	var err error
	switch {
	case ev.Kind == EventAction:
		res, err = b.click(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandStatus:
		res, err = b.status(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandCancel:
		res, err = b.cancelThread(ctx, ev)
	default:
		res, err = b.start(ctx, ev)
	}
	if errors.Is(err, errDuplicate) {
		return Result{Duplicate: true}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("handle %s event %s: %w", ev.Kind, ev.ID, err)
	}
	b.poke(b.wakeRuns)
	b.poke(b.wakeOutbox)
	res.Notice = b.redactor.Redact(res.Notice)
	return res, nil
}

// start handles a mention, a start command or a reply in a thread. With no run active in
// the thread it starts one, which sees the thread's history; a reply to a run that waits for
// input is its answer; anything else waits in the thread's queue.
func (b *Bot) start(ctx context.Context, ev Event) (Result, error) {
	claim := func(tx Tx) error {
		first, err := tx.ClaimEvent(ev.ID, b.now(), time.Duration(b.cfg.DedupeTTL))
		switch {
		case err != nil:
			return err
		case !first:
			return errDuplicate
		}
		return nil
	}
	text := strings.TrimSpace(ev.Text)
	var notice string
	switch {
	case !b.mayStart(ev):
		notice = noticeNotAllowed
	case text == "" && ev.Kind == EventReply:
	case text == "":
		notice = noticeNoGoal
	}
	if notice != "" || text == "" {
		if err := b.store.Update(ctx, claim); err != nil {
			return Result{}, err
		}
		return Result{Notice: notice}, nil
	}
	var res Result
	err := b.store.Update(ctx, func(tx Tx) error {
		res = Result{}
		if err := claim(tx); err != nil {
			return err
		}
		conv, err := conversation(tx, ev.Thread)
		if err != nil {
			return err
		}
		if conv.Active == "" {
			rec, err := b.newRun(tx, conv, ev.User, text)
			if err != nil {
				return err
			}
			res.RunID = rec.ID
			return tx.PutConversation(conv)
		}
		rec, err := tx.Run(conv.Active)
		if err != nil {
			return err
		}
		if ev.Kind != EventReply || rec.Status != agent.StatusAwaitingInput {
			return b.queue(tx, conv, ev, text)
		}
		prev := rec.Status
		if err := rec.State.Respond(text, displayName(ev.User)); err != nil {
			return err
		}
		rec.Status = rec.State.Status
		res.RunID = rec.ID
		return b.transition(tx, rec, prev)
	})
	return res, err
}

// queue puts a goal behind the thread's active run and tells the thread.
func (b *Bot) queue(tx Tx, conv *Conversation, ev Event, goal string) error {
	now := b.stamp()
	conv.Queue = append(conv.Queue, QueuedGoal{EventID: ev.ID, User: ev.User, Text: goal, At: now})
	if err := tx.PutConversation(conv); err != nil {
		return err
	}
	text := fmt.Sprintf("Queued %s's request; it starts when the current run in this thread ends (%d waiting).", displayName(ev.User), len(conv.Queue))
	return b.putOutbox(tx, conv.Thread, now, OutboxItem{Key: "notice/" + b.newID(), Kind: OutboxNotice, Text: text})
}

// conversation returns the thread's conversation, a new one if the thread has none yet.
func conversation(tx Tx, thread ThreadRef) (*Conversation, error) {
	conv, err := tx.Conversation(thread)
	if errors.Is(err, ErrNotFound) {
		return &Conversation{Thread: thread}, nil
	}
	return conv, err
}

// status lists the thread's runs, newest last.
func (b *Bot) status(ctx context.Context, ev Event) (Result, error) {
	var runs []*RunRecord
	var queued int
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		if runs, err = tx.Runs(RunFilter{Thread: &ev.Thread}); err != nil {
			return err
		}
		conv, err := tx.Conversation(ev.Thread)
		if err == nil {
			queued = len(conv.Queue)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if len(runs) == 0 {
		return Result{Notice: "No runs in this thread yet."}, nil
	}
	const shown = 10
	var sb strings.Builder
	if len(runs) > shown {
		fmt.Fprintf(&sb, "%d earlier runs not shown.\n", len(runs)-shown)
		runs = runs[len(runs)-shown:]
	}
	for _, r := range runs {
		fmt.Fprintf(&sb, "• %s: %s, step %d\n", clip(r.State.Goal, 80), statusLabel(r.Status), r.State.Step)
	}
	if queued > 0 {
		fmt.Fprintf(&sb, "%d request(s) queued.", queued)
	}
	return Result{Notice: strings.TrimSpace(sb.String())}, nil
}

// cancelThread cancels the thread's active run.
func (b *Bot) cancelThread(ctx context.Context, ev Event) (Result, error) {
	var active string
	err := b.store.View(ctx, func(tx Tx) error {
		conv, err := tx.Conversation(ev.Thread)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		active = conv.Active
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if active == "" {
		return Result{Notice: noticeNothingToRun}, nil
	}
	return b.cancelRun(ctx, ev.User, active)
}

// cancelRun ends a run for who. A run its goroutine is working on is cancelled through the
// goroutine's context with agent.ErrCancelled, and the loop saves the cancelled state; any
// other run (queued, paused) is cancelled in the store directly. b.mu is held across that
// write so the scheduler cannot start the run in between: a goroutine it starts afterwards
// loads the cancelled state and stops at once.
func (b *Bot) cancelRun(ctx context.Context, who User, runID string) (Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res := Result{RunID: runID}
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.Run(runID)
		if err != nil {
			return err
		}
		switch {
		case rec.Status.Terminal():
			res.Notice = noticeEnded
			return nil
		case !b.mayControl(rec, who):
			res.Notice = noticeNoControl
			return nil
		}
		now := b.stamp()
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "cancel", RunID: runID}); err != nil {
			return err
		}
		if b.running[runID] != nil && !rec.Status.Paused() {
			// The cancel itself is the goroutine's to save, after this commits (below).
			res.Notice = noticeCancelling
			return nil
		}
		return b.cancelInTx(tx, rec, "Cancelled by "+displayName(who)+".", now)
	})
	if err == nil && res.Notice == noticeCancelling {
		b.running[runID](agent.ErrCancelled)
	}
	return res, err
}

// cancelInTx cancels a run that no goroutine is advancing, closes its approvals and stores
// it with what the transition calls for.
func (b *Bot) cancelInTx(tx Tx, rec *RunRecord, reason string, now time.Time) error {
	prev := rec.Status
	if err := rec.State.Cancel(reason, now); err != nil {
		return err
	}
	rec.Status = rec.State.Status
	if err := b.closeApprovals(tx, rec, ApprovalCancelled, now); err != nil {
		return err
	}
	return b.transition(tx, rec, prev)
}

// closeApprovals settles the run's pending approvals as status, since the run ended without
// them, and queues the edit of their cards.
func (b *Bot) closeApprovals(tx Tx, rec *RunRecord, status ApprovalStatus, now time.Time) error {
	aps, err := tx.Approvals(rec.ID)
	if err != nil {
		return err
	}
	for _, ap := range aps {
		if ap.Status != ApprovalPending {
			continue
		}
		ap.Status, ap.DecidedAt = status, now
		if err := tx.PutApproval(ap); err != nil {
			return err
		}
		if err := b.putOutbox(tx, rec.Thread, now, OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: rec.ID, ApprovalID: ap.ID}); err != nil {
			return err
		}
	}
	return nil
}

// click handles a button: the action ID is looked up, and only what the store binds to it
// counts.
func (b *Bot) click(ctx context.Context, ev Event) (Result, error) {
	var act *Action
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		act, err = tx.Action(ev.ActionID)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		b.log.Info("unknown button", "action", ev.ActionID, "user", ev.User.ID)
		return Result{Notice: noticeInvalid}, nil
	}
	if err != nil {
		return Result{}, err
	}
	switch act.Kind {
	case ActionApprove, ActionReject:
		return b.decide(ctx, ev.User, act)
	case ActionCancel, ActionStop:
		return b.cancelRun(ctx, ev.User, act.RunID)
	case ActionContinue:
		return b.resume(ctx, ev.User, act)
	}
	b.log.Error("stored action of unknown kind", "action", act.ID, "kind", act.Kind)
	return Result{Notice: noticeInvalid}, nil
}

// resume continues a run paused as stuck, after failures or by the sanity check.
func (b *Bot) resume(ctx context.Context, who User, act *Action) (Result, error) {
	res := Result{RunID: act.RunID}
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.Run(act.RunID)
		if err != nil {
			return err
		}
		switch {
		case rec.Status != agent.StatusAwaitingInput || rec.ContinueAction != act.ID:
			res.Notice = noticeNotWaiting
			return nil
		case !b.mayControl(rec, who):
			res.Notice = noticeNoControl
			return nil
		}
		prev := rec.Status
		if err := rec.State.Respond("", displayName(who)); err != nil {
			return err
		}
		rec.Status = rec.State.Status
		now := b.stamp()
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "continue", RunID: rec.ID}); err != nil {
			return err
		}
		return b.transition(tx, rec, prev)
	})
	return res, err
}

// decide applies an Approve or Reject click. Everything is checked and changed in one
// transaction, so of two clicks racing only one finds the approval pending.
func (b *Bot) decide(ctx context.Context, who User, act *Action) (Result, error) {
	approve := act.Kind == ActionApprove
	res := Result{RunID: act.RunID}
	var decided *Approval
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice, decided = "", nil
		ap, err := tx.Approval(act.ApprovalID)
		if err != nil {
			return err
		}
		now := b.stamp()
		if msg := b.refuseDecision(ap, who, approve, now); msg != "" {
			res.Notice = msg
			return nil
		}
		rec, err := tx.Run(ap.RunID)
		if err != nil {
			return err
		}
		if c := rec.State.Call(ap.CallID); c == nil || c.ArgsHash != ap.ArgsHash {
			b.log.Error("approval does not match its call", "approval", ap.ID, "run", rec.ID, "call", ap.CallID)
			res.Notice = noticeNotWaiting
			return nil
		}
		prev := rec.Status
		d := agent.Decision{Approved: approve, By: displayName(who), At: now}
		if err := rec.State.Decide(ap.CallID, d); err != nil {
			b.log.Warn("decision on a call that no longer waits", "approval", ap.ID, "err", err)
			res.Notice = noticeNotWaiting
			return nil
		}
		rec.Status = rec.State.Status
		ap.Status, ap.DecidedBy, ap.DecidedAt = ApprovalRejected, who, now
		if approve {
			ap.Status = ApprovalApproved
		}
		if err := tx.PutApproval(ap); err != nil {
			return err
		}
		decided = ap
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: string(act.Kind), RunID: rec.ID, ApprovalID: ap.ID,
			CallID: ap.CallID, Tool: ap.Tool, ArgsHash: ap.ArgsHash}); err != nil {
			return err
		}
		if err := b.putOutbox(tx, rec.Thread, now, OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: rec.ID, ApprovalID: ap.ID}); err != nil {
			return err
		}
		return b.transition(tx, rec, prev)
	})
	if err == nil && decided != nil {
		b.decided(decided.Status, decided.DecidedAt.Sub(decided.CreatedAt))
	}
	return res, err
}

// refuseDecision says why who may not decide on ap now, or "" if they may.
func (b *Bot) refuseDecision(ap *Approval, who User, approve bool, now time.Time) string {
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
	p := b.cfg.Policy
	requester := who.ID == ap.Requester.ID
	approver := slices.Contains(p.Approvers, who.ID)
	var allowed bool
	switch p.ApproveBy {
	case ApproveByApprovers:
		allowed = approver
	case ApproveByChannel:
		allowed = approver || b.userAllowed(who)
	default:
		allowed = approver || requester
	}
	// Saying no to one's own run is always allowed: it can only make the run do less.
	if !approve && requester {
		allowed = true
	}
	if !allowed {
		return "You are not allowed to decide on this request."
	}
	if approve && requester && ap.Risk >= agent.RiskDangerous && p.dangerousNeedsOther() {
		return "This call is dangerous: someone other than the person who started the run must approve it."
	}
	return ""
}

// mayStart applies the channel and user allowlists.
func (b *Bot) mayStart(ev Event) bool {
	ch := b.cfg.Policy.AllowedChannels
	return (len(ch) == 0 || slices.Contains(ch, ev.Thread.Channel)) && b.userAllowed(ev.User)
}

func (b *Bot) userAllowed(u User) bool {
	us := b.cfg.Policy.AllowedUsers
	return len(us) == 0 || slices.Contains(us, u.ID)
}

// mayControl says whether who may cancel or continue rec: its requester, an approver, or
// anyone allowed to use the bot when approvals are the channel's business.
func (b *Bot) mayControl(rec *RunRecord, who User) bool {
	p := b.cfg.Policy
	return who.ID == rec.Requester.ID || slices.Contains(p.Approvers, who.ID) ||
		p.ApproveBy == ApproveByChannel && b.userAllowed(who)
}

// displayName is how a person is named in messages and decisions.
func displayName(u User) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}
