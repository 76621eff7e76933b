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
	noticeOtherThread  = "This button belongs to another thread."
	noticeNoted        = "Noted: the run will read this at its next step."
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
	res, err := b.handle(ctx, ev)
	if ev.ID != "" {
		b.settleInbox(ctx, ev.ID)
	}
	return res, err
}

func (b *Bot) handle(ctx context.Context, ev Event) (Result, error) {
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
	if ev.Kind == EventReply && !ev.Direct {
		// A reply belongs to the bot only in a thread it has a conversation in (one it
		// started or was mentioned in); anywhere else people are talking among themselves,
		// and the bot neither answers nor tells them anything.
		ours, err := b.hasConversation(ctx, ev.Thread)
		if err != nil {
			return Result{}, fmt.Errorf("handle event %s: %w", ev.ID, err)
		}
		if !ours {
			return Result{}, nil
		}
	}
	cmd, isCmd := b.readCommand(ev)
	goal := (!isCmd || cmd.verb == verbRun) && ev.Kind != EventAction && (ev.Kind != EventCommand || ev.Command == CommandStart)
	if goal && len(ev.Text) > b.cfg.MaxGoalBytes {
		// Refused before it is claimed or stored: a 20 MB message would otherwise be kept in
		// the run, the thread's history and every prompt. Nothing is claimed, so a retry
		// of the same delivery gets the same answer.
		return Result{Notice: fmt.Sprintf("That message is %s; loopbot takes goals and replies up to %s. "+
			"Put large content in a file in the workspace or link to it, and ask again.", byteSize(len(ev.Text)), byteSize(b.cfg.MaxGoalBytes))}, nil
	}
	if !goal {
		first, err := b.store.ClaimEvent(ctx, ev.ID, b.clock.Now(), time.Duration(b.cfg.DedupeTTL))
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
	case isCmd:
		res, err = b.command(ctx, ev, cmd)
	case ev.Kind == EventAction:
		res, err = b.click(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandStatus:
		res, err = b.status(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandCancel:
		res, err = b.cancelThread(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandGrants:
		res, err = b.listGrants(ctx, ev)
	case ev.Kind == EventCommand && ev.Command == CommandAutonomy:
		res, err = b.autonomy(ctx, ev)
	default:
		res, err = b.start(ctx, ev)
	}
	if errors.Is(err, errDuplicate) {
		return Result{Duplicate: true}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("handle %s event %s: %w", ev.Kind, ev.ID, err)
	}
	b.sched.poke()
	b.outboxChanged()
	res.Notice = b.redactor.Redact(res.Notice)
	return res, nil
}

// start handles a mention, a start command or a reply in a thread. With no run active in
// the thread it starts one, which sees the thread's history; a reply to a run that waits for
// input is its answer; anything else waits in the thread's queue.
func (b *Bot) start(ctx context.Context, ev Event) (Result, error) {
	claim := func(tx Tx) error { return b.claimIn(tx, ev.ID) }
	text := strings.TrimSpace(ev.Text)
	var notice string
	switch {
	case !b.cfg.Policy.mayStart(ev):
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
	var stop, pause, answered string
	var answer agent.Answer
	// A run this creates starts here as it commits, if a slot is free (handoff.go).
	h := b.sched.reserve()
	defer h.abandon()
	err := b.store.Update(ctx, func(tx Tx) error {
		res, stop, pause, answered = Result{}, "", "", ""
		h.reset()
		if err := claim(tx); err != nil {
			return err
		}
		conv, err := conversation(tx, ev.Thread)
		if err != nil {
			return err
		}
		if conv.Active == "" {
			var earlier []HistoryMessage
			if len(conv.Runs) == 0 && ev.History != nil {
				// A thread the bot is new to: what was said before it was asked. Once it
				// has runs here, their goals and answers are the history.
				earlier = ev.History.Messages
			}
			rec, err := b.recs.newRun(tx, conv, ev.User, text, earlier, h)
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
		if ev.Kind == EventReply && controlWords(text) != wordsStop && b.cfg.Policy.mayControl(rec, ev.User) {
			// A tool of the run waits on a question in this thread (ask.go): the reply of
			// someone who may control the run answers it, unless it is a stop.
			q, _, err := b.pendingQuestion(tx, conv)
			if err != nil {
				return err
			}
			if q != nil && q.RunID == rec.ID {
				res.RunID = rec.ID
				given, notice := q.answerWith(text)
				if notice != "" {
					res.Notice = notice
					return nil
				}
				answered = q.ID
				answer, err = b.answerQuestion(tx, conv, q, ev.User, agent.AnswerGiven, given)
				return err
			}
		}
		if ev.Kind == EventReply && steerable(rec.Status) {
			// A plain-words stop or pause is a control, never a note for the model: it is
			// done below, after the claim commits, exactly as the Cancel or Pause button does.
			switch controlWords(text) {
			case wordsStop:
				stop = rec.ID
				return nil
			case wordsPause:
				pause = rec.ID
				return nil
			}
			// A reply to a run that is working is said to the run: it reaches the model at
			// the next step boundary, instead of waiting as a new goal behind it.
			res.RunID, res.Notice = rec.ID, noticeNoted
			return b.recs.addNote(tx, conv, rec, ev.User, text)
		}
		if ev.Kind != EventReply || rec.Status != agent.StatusAwaitingInput {
			return b.recs.queueGoal(tx, conv, ev.ID, ev.User, text)
		}
		res.RunID = rec.ID
		return b.recs.respond(tx, rec, text, displayName(ev.User))
	})
	h.done(ctx, err)
	if err == nil && answered != "" {
		b.answered(ctx, answered, answer)
	}
	if err == nil && stop != "" {
		return b.cancelRun(ctx, ev.User, ev.Thread, stop)
	}
	if err == nil && pause != "" {
		return b.pauseRun(ctx, ev.User, ev.Thread, pause)
	}
	return res, err
}

// claimIn claims the delivery id inside tx, so the claim commits with what tx does about
// it; errDuplicate rolls back a delivery that was claimed before.
func (b *Bot) claimIn(tx Tx, id string) error {
	first, err := tx.ClaimEvent(id, b.clock.Now(), time.Duration(b.cfg.DedupeTTL))
	switch {
	case err != nil:
		return err
	case !first:
		return errDuplicate
	}
	if b.inbox.has(id) {
		// The event leaves the inbox in the transaction that handles it: a crash can
		// neither lose it nor leave it there to be handled again.
		return tx.DeleteInbox(id)
	}
	return nil
}

// hasConversation reports whether the bot has a conversation in thread. Conversations are
// never deleted, so the answer cannot turn false before the reply is handled.
func (b *Bot) hasConversation(ctx context.Context, thread ThreadRef) (bool, error) {
	err := b.store.View(ctx, func(tx Tx) error {
		_, err := tx.Conversation(thread)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up conversation: %w", err)
	}
	return true, nil
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
	var level agent.Level
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		if runs, err = tx.Runs(RunFilter{Thread: &ev.Thread}); err != nil {
			return err
		}
		if level, err = channelLevel(tx, ev.Thread, b.recs.level); err != nil {
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
		fmt.Fprintf(&sb, "%d request(s) queued.\n", queued)
	}
	fmt.Fprintf(&sb, "Autonomy here: %s.", level)
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
	return b.cancelRun(ctx, ev.User, ev.Thread, active)
}

// cancelRun ends a run for who, who acted in thread from. A run its goroutine is working on
// is cancelled through the goroutine's context with agent.ErrCancelled, and the loop saves
// the cancelled state; any other run (queued, paused) is cancelled in the store directly.
// No lock is held across the store write: a goroutine the scheduler starts meanwhile either
// loads the cancelled state and stops at once or finds the run ended at its first
// checkpoint (errRunEnded), and a goroutine that ends between the write and the interrupt
// leaves the cancel to settleCancel.
func (b *Bot) cancelRun(ctx context.Context, who User, from ThreadRef, runID string) (Result, error) {
	res := Result{RunID: runID}
	reason := "Cancelled by " + displayName(who) + "."
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if res.Notice = b.refuseControl("cancel", rec, who, from); res.Notice != "" {
			return nil
		}
		now := b.clock.stamp()
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "cancel", RunID: runID}); err != nil {
			return err
		}
		if b.sched.isRunning(runID) && !rec.Status.Paused() {
			// The cancel itself is the goroutine's to save, after this commits (below).
			res.Notice = noticeCancelling
			return nil
		}
		return b.recs.cancel(tx, rec, reason, now)
	})
	if err == nil && res.Notice == "" {
		// Cancelled in the store: another replica may be working on the run.
		b.notifyCancelled(ctx, runID)
	}
	if err == nil && res.Notice == noticeCancelling && !b.sched.interrupt(runID, agent.ErrCancelled) {
		// The goroutine ended after the check: the run paused or ended meanwhile, and nothing
		// works on it now, so it is cancelled in the store unless it is over.
		err = b.sched.settleCancel(ctx, runID, reason)
	}
	return res, err
}

// refuseControl says why who, acting in thread from, may not verb (cancel, pause) run rec,
// or "" if they may.
func (b *Bot) refuseControl(verb string, rec *RunRecord, who User, from ThreadRef) string {
	switch {
	case !fromThread(from, rec.Thread):
		b.log.Warn(verb+" from another thread refused", "run", rec.ID, "user", who.ID, "from", from.Key(), "thread", rec.Thread.Key())
		return noticeOtherThread
	case rec.Status.Terminal():
		return noticeEnded
	case !b.cfg.Policy.mayControl(rec, who):
		return noticeNoControl
	}
	return ""
}

// fromThread reports whether a click that came from thread from may act on something that
// lives in thread home: a button copied to another thread or platform (or sent with another
// thread's ID to the web console) must not decide there. The channel must match as well,
// except when the adapter did not learn the thread's channel and let the thread stand for
// it (a Discord button on a payload without its channel).
func fromThread(from, home ThreadRef) bool {
	return from.Platform == home.Platform && from.Thread == home.Thread &&
		(from.Channel == home.Channel || from.Channel == from.Thread)
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
	case ActionApprove, ActionReject, ActionApproveRun, ActionApproveAlways, ActionRejectStop:
		return b.decide(ctx, ev.User, ev.Thread, act, clipReason(ev.Text))
	case ActionRevoke:
		return b.revoke(ctx, ev.User, ev.Thread, act)
	case ActionCancel, ActionStop:
		return b.cancelRun(ctx, ev.User, ev.Thread, act.RunID)
	case ActionContinue:
		return b.resume(ctx, ev.User, ev.Thread, act)
	case ActionFeedback:
		return b.rate(ctx, ev.User, ev.Thread, act)
	case ActionAnswer, ActionSkip, ActionDecline:
		return b.answerClick(ctx, ev.User, ev.Thread, act)
	case ActionPause:
		return b.pauseRun(ctx, ev.User, ev.Thread, act.RunID)
	case ActionForget:
		return b.forget(ctx, ev.User, ev.Thread, act)
	case ActionSavePlaybook:
		return b.savePlaybook(ctx, ev.User, ev.Thread, act)
	}
	b.log.Error("stored action of unknown kind", "action", act.ID, "kind", act.Kind)
	return Result{Notice: noticeInvalid}, nil
}

// resume continues a run paused as stuck, after failures or by the sanity check.
func (b *Bot) resume(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	res := Result{RunID: act.RunID}
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.Run(act.RunID)
		if err != nil {
			return err
		}
		switch {
		case !fromThread(from, rec.Thread):
			b.log.Warn("continue from another thread refused", "run", rec.ID, "user", who.ID, "from", from.Key(), "thread", rec.Thread.Key())
			res.Notice = noticeOtherThread
			return nil
		case rec.Status != agent.StatusAwaitingInput || rec.ContinueAction != act.ID:
			res.Notice = noticeNotWaiting
			return nil
		case !b.cfg.Policy.mayControl(rec, who):
			res.Notice = noticeNoControl
			return nil
		}
		if err := tx.AppendAudit(AuditEntry{At: b.clock.stamp(), Actor: who, Action: "continue", RunID: rec.ID}); err != nil {
			return err
		}
		return b.recs.respond(tx, rec, "", displayName(who))
	})
	return res, err
}

// decide applies an Approve or Reject click from thread from. Everything is checked and
// changed in one transaction, so of two clicks racing only one finds the approval pending.
func (b *Bot) decide(ctx context.Context, who User, from ThreadRef, act *Action, reason string) (Result, error) {
	v := verdict{outcome: ApprovalRejected, by: who, grant: grantScope(act.Kind), stop: act.Kind == ActionRejectStop}
	if act.Kind == ActionApprove || v.grant != "" {
		v.outcome = ApprovalApproved
	} else {
		v.reason = reason
	}
	res := Result{RunID: act.RunID}
	var decided *Approval
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice, decided = "", nil
		ap, err := tx.Approval(act.ApprovalID)
		if err != nil {
			return err
		}
		if !fromThread(from, ap.Thread) {
			b.log.Warn("decision from another thread refused", "approval", ap.ID, "user", who.ID, "from", from.Key(), "thread", ap.Thread.Key())
			res.Notice = noticeOtherThread
			return nil
		}
		now := b.clock.stamp()
		if msg := b.cfg.Policy.refuseDecision(ap, who, v.outcome == ApprovalApproved, now); msg != "" {
			res.Notice = msg
			return nil
		}
		if msg := b.cfg.Policy.refuseGrant(ap, who, v.grant); msg != "" {
			b.log.Warn("grant refused", "approval", ap.ID, "user", who.ID, "scope", v.grant, "risk", ap.Risk)
			res.Notice = msg
			return nil
		}
		ok, err := b.recs.settle(tx, ap, v, now)
		if err != nil {
			return err
		}
		if !ok {
			res.Notice = noticeNotWaiting
			return nil
		}
		decided = ap
		if v.stop {
			return b.recs.rejectStop(tx, ap, who, v.reason, now)
		}
		return nil
	})
	if err == nil && decided != nil {
		b.decided(decided.Status, decided.DecidedAt.Sub(decided.CreatedAt))
	}
	return res, err
}

// displayName is how a person is named in messages and decisions.
func displayName(u User) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}

// byteSize writes n bytes for a person: 900 bytes, 16 KB, 20.0 MB.
func byteSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// steerable reports whether a reply to a run in status s is said to the run as a note: it is
// working, or will be again as soon as its approvals are decided.
func steerable(s agent.Status) bool {
	return s == agent.StatusQueued || s == agent.StatusRunning || s == agent.StatusAwaitingApproval
}

// What a reply to a working run asks for when it is one of the control phrases.
const (
	wordsNote = iota
	wordsStop
	wordsPause
)

// stopWords and pauseWords are the whole replies read as a stop or a pause request. They
// are exact phrases, not words to look for: "stop using the cache and retry" is a note.
var (
	stopWords  = []string{"stop", "stop it", "stop now", "stop please", "please stop", "cancel", "cancel it", "abort"}
	pauseWords = []string{"pause", "wait", "hold on"}
)

// controlWords reports whether the reply text is a stop request, a pause request or
// neither (a note), ignoring case, surrounding space and trailing punctuation.
func controlWords(text string) int {
	s := strings.ToLower(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), ".!?… ")))
	switch {
	case slices.Contains(stopWords, s):
		return wordsStop
	case slices.Contains(pauseWords, s):
		return wordsPause
	}
	return wordsNote
}
