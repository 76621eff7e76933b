package bot

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// errRunEnded stops a run goroutine whose run was ended by someone else (a cancel that
// reached the store while the goroutine was starting): its checkpoint must not undo that.
var errRunEnded = errors.New("run already ended")

// expiredReason is what the model is told about a call nobody decided on in time.
const expiredReason = "approval expired"

// failedReason is what a thread is told of a run the loop could not advance.
const failedReason = "loopbot hit an internal error and stopped this run."

// loopbot is the actor of what the bot decides itself, such as an expiry.
var loopbot = User{ID: "loopbot", Name: "loopbot", Bot: true}

// records holds every rule that runs inside a store transaction: creating a run, moving it
// from one state to the next with what each move calls for, requesting, settling and
// closing approvals, cancelling and failing runs, and queueing goals. Every role (Handle,
// the scheduler, the sweeper) changes runs through it, so a rule is written once. Its
// methods do no I/O besides tx, hold no lock and keep no state between calls: everything
// they decide on is read from tx, which is what makes a read-check-write a compare-and-set.
type records struct {
	clock  *clock
	newID  func() string
	expiry time.Duration // how long an approval request waits
	log    *slog.Logger
	level  agent.Level // the autonomy level of channels nobody set one for
	// savePlaybooks gives a completed run's answer a Save as playbook button.
	savePlaybooks bool
}

// deriveStatus sets the record's status from its state's. It is the only place that does:
// the status on the record is an index the store keeps, and the state is the truth.
func deriveStatus(rec *RunRecord) { rec.Status = rec.State.Status }

// Outbox items, one constructor a kind, so that every writer of an item builds its key the
// same way. Items that share a key replace each other: a run's status card and an approval's
// card are one key each, so a burst of states is one edit; an answer and a failure summary
// are posted once per run; questions and notices are new posts every time.

func cardItem(runID string) OutboxItem {
	return OutboxItem{Key: "card/" + runID, Kind: OutboxCard, RunID: runID}
}

func approvalCardItem(ap *Approval) OutboxItem {
	return OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: ap.RunID, ApprovalID: ap.ID}
}

func answerItem(runID string) OutboxItem {
	return OutboxItem{Key: "answer/" + runID, Kind: OutboxAnswer, RunID: runID}
}

func failureItem(runID string) OutboxItem {
	return OutboxItem{Key: "failure/" + runID, Kind: OutboxFailure, RunID: runID}
}

// questionItem is one question or pause notice; id makes it a post of its own.
func questionItem(runID, id, text string) OutboxItem {
	return OutboxItem{Key: "question/" + runID + "/" + id, Kind: OutboxQuestion, RunID: runID, Text: text}
}

// noticeItem is one line for the thread; runID may be empty. id makes it a post of its own.
func noticeItem(runID, id, text string) OutboxItem {
	return OutboxItem{Key: "notice/" + id, Kind: OutboxNotice, RunID: runID, Text: text}
}

// put stores items for thread, stamped in order from now.
func (r *records) put(tx Tx, thread ThreadRef, now time.Time, items ...OutboxItem) error {
	for i, it := range items {
		it.Thread = thread
		it.CreatedAt = now.Add(time.Duration(i))
		if err := tx.PutOutbox(it); err != nil {
			return err
		}
	}
	return nil
}

// refreshCards queues an edit of the status card of every run that is not over and of the
// card of every pending approval, at start. The cards are rendered from the store, so they
// show the state the new process starts from, and a platform that lost its view of a thread
// while loopbot was down (the web console keeps its threads in memory) gets it back with
// working buttons. Editing a card that is already up to date changes nothing a person sees.
func (r *records) refreshCards(tx Tx) error {
	runs, err := tx.Runs(RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning, agent.StatusAwaitingApproval, agent.StatusAwaitingInput}})
	if err != nil {
		return err
	}
	now := r.clock.stamp()
	for _, rec := range runs {
		if err := r.put(tx, rec.Thread, now, cardItem(rec.ID)); err != nil {
			return err
		}
	}
	pending, err := tx.Approvals("")
	if err != nil {
		return err
	}
	for _, ap := range pending {
		if err := r.put(tx, ap.Thread, now, approvalCardItem(ap)); err != nil {
			return err
		}
	}
	return nil
}

// newRun stores a queued run of goal in conv's thread, with the thread's earlier goals and
// answers as history, and makes it the thread's active run. The caller stores conv.
//
// With h, a slot of this replica's scheduler kept for the run (handoff.go), the run is leased
// to this replica in tx and made running at once: its creator starts it as tx commits, and
// the run needs no write of its own to say it started.
func (r *records) newRun(tx Tx, conv *Conversation, requester User, goal string, earlier []HistoryMessage, h *handoff) (*RunRecord, error) {
	history := threadHistory(earlier)
	for _, id := range conv.Runs {
		prev, err := tx.Run(id)
		if err != nil {
			return nil, fmt.Errorf("load earlier run %s: %w", id, err)
		}
		history = append(history, agent.Message{Role: agent.RoleUser, Content: prev.State.Goal})
		if prev.State.Answer != "" {
			history = append(history, agent.Message{Role: agent.RoleAssistant, Content: prev.State.Answer})
		}
	}
	now := r.clock.stamp()
	id := r.newID()
	rec := &RunRecord{
		ID:           id,
		Thread:       conv.Thread,
		Requester:    requester,
		State:        agent.NewState(id, goal, history, now),
		CancelAction: r.newID(),
		PauseAction:  r.newID(),
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	level, err := channelLevel(tx, conv.Thread, r.level)
	if err != nil {
		return nil, err
	}
	rec.State.Autonomy = level
	if rec.State.Pinned, err = pinnedFacts(tx, conv.Thread); err != nil {
		return nil, fmt.Errorf("load the channel's memory: %w", err)
	}
	taken, err := h.take(tx, id)
	if err != nil {
		return nil, err
	}
	if taken {
		if err := rec.State.Start(now); err != nil {
			return nil, err
		}
	}
	deriveStatus(rec)
	if err := tx.PutAction(&Action{ID: rec.CancelAction, Kind: ActionCancel, RunID: id}); err != nil {
		return nil, err
	}
	if err := tx.PutAction(&Action{ID: rec.PauseAction, Kind: ActionPause, RunID: id}); err != nil {
		return nil, err
	}
	if err := tx.PutRun(rec); err != nil {
		return nil, err
	}
	conv.Runs = append(conv.Runs, id)
	conv.Active = id
	return rec, r.put(tx, conv.Thread, now, cardItem(id))
}

// queueGoal puts a goal behind the thread's active run, stores conv and tells the thread.
func (r *records) queueGoal(tx Tx, conv *Conversation, eventID string, who User, goal string) error {
	now := r.clock.stamp()
	conv.Queue = append(conv.Queue, QueuedGoal{EventID: eventID, User: who, Text: goal, At: now})
	if err := tx.PutConversation(conv); err != nil {
		return err
	}
	text := fmt.Sprintf("Queued %s's request; it starts when the current run in this thread ends (%d waiting).", displayName(who), len(conv.Queue))
	return r.put(tx, conv.Thread, now, noticeItem("", r.newID(), text))
}

// nextGoal clears the thread's active run and queues the first goal waiting behind it as a
// new run; the scheduler starts it once it is woken after the commit.
func (r *records) nextGoal(tx Tx, thread ThreadRef) error {
	conv, err := tx.Conversation(thread)
	if err != nil {
		return err
	}
	conv.Active = ""
	if len(conv.Queue) > 0 {
		q := conv.Queue[0]
		conv.Queue = conv.Queue[1:]
		if _, err := r.newRun(tx, conv, q.User, q.Text, nil, nil); err != nil {
			return err
		}
	}
	return tx.PutConversation(conv)
}

// checkpoint stores st, the state a run goroutine reached, with what its transition calls
// for. It reads the stored run without its state, which it replaces, unless the state has
// calls of unknown outcome, which are told about by comparing with the stored state: the
// write lock is held meanwhile, and decoding a state of tens of kilobytes at every step
// would hold it longest. A run that someone else ended is left as it is (errRunEnded).
// enc, when not nil, is st as the store encoded it before the transaction.
func (r *records) checkpoint(tx Tx, st *agent.State, enc EncodedState) error {
	rec, err := tx.RunHeader(st.RunID)
	if err != nil {
		return err
	}
	if rec.Status.Terminal() {
		return errRunEnded
	}
	var old *agent.State
	unknown := st.AnyCall(func(c *agent.CallRecord) bool { return c.Status == agent.CallUnknown })
	if unknown {
		stored, err := tx.Run(st.RunID)
		if err != nil {
			return err
		}
		old = stored.State
	}
	if err := r.auditGrantUses(tx, st); err != nil {
		return err
	}
	prev := rec.Status
	rec.State, rec.Encoded = st, enc
	deriveStatus(rec)
	if unknown {
		if err := r.tellUnknownOutcomes(tx, rec, old); err != nil {
			return err
		}
	}
	if err := r.dropTakenNotes(tx, rec); err != nil {
		return err
	}
	if err := r.postReviews(tx, rec); err != nil {
		return err
	}
	return r.transition(tx, rec, prev)
}

// addNote keeps what who said to the working run rec until the loop takes it.
func (r *records) addNote(tx Tx, conv *Conversation, rec *RunRecord, who User, text string) error {
	conv.NoteSeq++
	conv.Notes = append(conv.Notes, RunNote{Seq: conv.NoteSeq, RunID: rec.ID, From: displayName(who), Text: text, At: r.clock.stamp()})
	return tx.PutConversation(conv)
}

// dropTakenNotes forgets the notes the run's state shows it took, and, once the run is over,
// the ones it never took: those were meant for a run that no longer works.
func (r *records) dropTakenNotes(tx Tx, rec *RunRecord) error {
	if rec.State.SteerSeq == 0 && !rec.Status.Terminal() {
		return nil
	}
	conv, err := tx.Conversation(rec.Thread)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	kept := slices.DeleteFunc(slices.Clone(conv.Notes), func(n RunNote) bool {
		return n.RunID == rec.ID && (n.Seq <= rec.State.SteerSeq || rec.Status.Terminal())
	})
	if len(kept) == len(conv.Notes) {
		return nil
	}
	conv.Notes = kept
	return tx.PutConversation(conv)
}

// tellUnknownOutcomes tells the thread about each call that a previous process left
// running and that the loop has just marked as having an unknown outcome (it is not idempotent,
// so it was not run again): the model is told in its tool result, and the people who may have
// to check the call's effects are told here.
func (r *records) tellUnknownOutcomes(tx Tx, rec *RunRecord, old *agent.State) error {
	was := map[string]agent.CallStatus{}
	if old != nil {
		for _, c := range old.AllCalls() {
			was[c.ID] = c.Status
		}
	}
	for _, c := range rec.State.AllCalls() {
		if c.Status != agent.CallUnknown || was[c.ID] == agent.CallUnknown {
			continue
		}
		text := fmt.Sprintf("loopbot stopped while %s was running and did not run it again, since it may have had effects. Check what it did before asking for it again.", "`"+c.Name+"`")
		if err := r.put(tx, rec.Thread, r.clock.stamp(), noticeItem(rec.ID, r.newID(), text)); err != nil {
			return err
		}
	}
	return nil
}

// transition stores rec, whose state moved from prev, with what the move calls for: a
// refreshed status card always; approval requests, a question, the answer or a failure
// summary when the status changed; and the thread's next goal when the run ended. The
// caller has derived rec.Status from the new state.
func (r *records) transition(tx Tx, rec *RunRecord, prev agent.Status) error {
	now := r.clock.stamp()
	rec.UpdatedAt = now
	st := rec.State
	items := []OutboxItem{cardItem(rec.ID)}
	switch {
	case rec.Status == agent.StatusAwaitingApproval:
		// Approvals are made per call, so a checkpoint repeated in the same pause adds none.
		made, err := tx.Approvals(rec.ID)
		if err != nil {
			return err
		}
		has := map[string]bool{}
		for _, a := range made {
			has[a.CallID] = true
		}
		for _, c := range st.PendingApprovals() {
			if has[c.ID] {
				continue
			}
			ap, err := r.requestApproval(tx, rec, c, now)
			if err != nil {
				return err
			}
			items = append(items, approvalCardItem(ap))
		}
	case rec.Status == prev:
	case rec.Status == agent.StatusAwaitingInput:
		if st.Pause.Kind == agent.PausePerson {
			rec.PauseBy = "" // taken: the run is paused
		}
		text := st.Pause.Reason
		if st.Pause.Kind == agent.PauseAskUser || st.Pause.Kind == agent.PauseQuestion {
			text = st.Pause.Question
		} else {
			rec.ContinueAction, rec.StopAction = r.newID(), r.newID()
			for id, kind := range map[string]ActionKind{rec.ContinueAction: ActionContinue, rec.StopAction: ActionStop} {
				if err := tx.PutAction(&Action{ID: id, Kind: kind, RunID: rec.ID}); err != nil {
					return err
				}
			}
		}
		items = append(items, questionItem(rec.ID, r.newID(), text))
	case rec.Status == agent.StatusCompleted:
		if err := r.offerFeedback(tx, rec); err != nil {
			return err
		}
		if r.savePlaybooks {
			rec.SaveAction = r.newID()
			if err := tx.PutAction(&Action{ID: rec.SaveAction, Kind: ActionSavePlaybook, RunID: rec.ID}); err != nil {
				return err
			}
		}
		items = append(items, answerItem(rec.ID))
	case rec.Status.Terminal():
		items = append(items, failureItem(rec.ID))
	}
	if err := tx.PutRun(rec); err != nil {
		return err
	}
	if err := r.put(tx, rec.Thread, now, items...); err != nil {
		return err
	}
	if rec.Status.Terminal() && prev != rec.Status {
		return r.nextGoal(tx, rec.Thread)
	}
	return nil
}

// requestApproval stores an approval request for call c and the actions of its buttons.
func (r *records) requestApproval(tx Tx, rec *RunRecord, c agent.CallRecord, now time.Time) (*Approval, error) {
	ap := &Approval{
		ID:            r.newID(),
		RunID:         rec.ID,
		CallID:        c.ID,
		Tool:          c.Name,
		ArgsHash:      c.ArgsHash,
		Risk:          c.Risk,
		Thread:        rec.Thread,
		Requester:     rec.Requester,
		ApproveAction: r.newID(),
		RejectAction:  r.newID(),
		Status:        ApprovalPending,
		CreatedAt:     now,
		ExpiresAt:     now.Add(r.expiry),
	}
	if err := r.grantActions(tx, ap, c); err != nil {
		return nil, err
	}
	if err := tx.PutApproval(ap); err != nil {
		return nil, err
	}
	for id, kind := range map[string]ActionKind{ap.ApproveAction: ActionApprove, ap.RejectAction: ActionReject} {
		if err := tx.PutAction(&Action{ID: id, Kind: kind, RunID: rec.ID, ApprovalID: ap.ID}); err != nil {
			return nil, err
		}
	}
	return ap, nil
}

// verdict is how an approval is settled: approved or rejected by a person, or expired by
// loopbot.
type verdict struct {
	outcome ApprovalStatus
	by      User
	reason  string
	// grant is the grant an approval makes besides (grants.go); stop ends the run after a
	// rejection.
	grant agent.GrantScope
	stop  bool
}

// byPerson reports whether a person decided, as opposed to the approval expiring.
func (v verdict) byPerson() bool { return v.outcome != ApprovalExpired }

// auditActions names a verdict in the audit log.
var auditActions = map[ApprovalStatus]string{
	ApprovalApproved: string(ActionApprove),
	ApprovalRejected: string(ActionReject),
	ApprovalExpired:  "expire",
}

// settle closes the pending approval ap with v and gives its call the decision: one rule for
// a person's click and for an expiry. A person decides on exactly the call the card showed:
// if the run no longer has that call with arguments that hash to what the approval bound, or
// the call no longer waits, nothing is written and settle reports false. An expiry closes the
// approval even when the call no longer waits (the run was cancelled, say), since it can only
// make the run do less; the run is then left as it is. The caller has checked that ap is
// pending and that v may be applied.
func (r *records) settle(tx Tx, ap *Approval, v verdict, now time.Time) (bool, error) {
	rec, err := tx.Run(ap.RunID)
	if err != nil {
		return false, err
	}
	log := r.log.With("approval", ap.ID, "run", rec.ID, "call", ap.CallID)
	if c := rec.State.Call(ap.CallID); v.byPerson() && (c == nil || c.ArgsHash != ap.ArgsHash) {
		log.Error("approval does not match its call")
		return false, nil
	}
	prev := rec.Status
	d := agent.Decision{Approved: v.outcome == ApprovalApproved, By: displayName(v.by), Reason: v.reason, At: now}
	decided := true
	if err := rec.State.Decide(ap.CallID, d); err != nil {
		if v.byPerson() {
			log.Warn("decision on a call that no longer waits", "err", err)
			return false, nil
		}
		log.Warn("approval closed on a call that no longer waits", "outcome", v.outcome, "err", err)
		decided = false
	}
	// Only a decision that took effect makes the grant it asked for (an expiry asks for none).
	if err := r.grant(tx, rec, ap, rec.State.Call(ap.CallID), v, now); err != nil {
		return false, err
	}
	ap.Status, ap.DecidedAt, ap.Reason = v.outcome, now, v.reason
	if v.byPerson() {
		ap.DecidedBy = v.by
	}
	if err := tx.PutApproval(ap); err != nil {
		return false, err
	}
	if err := tx.AppendAudit(AuditEntry{At: now, Actor: v.by, Action: auditActions[v.outcome], RunID: ap.RunID,
		ApprovalID: ap.ID, CallID: ap.CallID, Tool: ap.Tool, ArgsHash: ap.ArgsHash, Detail: v.reason}); err != nil {
		return false, err
	}
	if err := r.put(tx, ap.Thread, now, approvalCardItem(ap)); err != nil {
		return false, err
	}
	log.Info("approval decided", "outcome", v.outcome, "by", v.by.ID, "tool", ap.Tool)
	if !decided {
		return true, nil
	}
	deriveStatus(rec)
	return true, r.transition(tx, rec, prev)
}

// expireDue settles as expired every pending approval whose deadline has passed, and returns
// how long each waited.
func (r *records) expireDue(tx Tx) ([]time.Duration, error) {
	pending, err := tx.Approvals("")
	if err != nil {
		return nil, err
	}
	var waits []time.Duration
	now := r.clock.stamp()
	for _, ap := range pending {
		if ap.Status != ApprovalPending || now.Before(ap.ExpiresAt) {
			continue
		}
		if _, err := r.settle(tx, ap, verdict{outcome: ApprovalExpired, by: loopbot, reason: expiredReason}, now); err != nil {
			return nil, err
		}
		waits = append(waits, now.Sub(ap.CreatedAt))
	}
	return waits, nil
}

// closeApprovals settles the run's pending approvals as status, since the run ended without
// them, and queues the edit of their cards.
func (r *records) closeApprovals(tx Tx, rec *RunRecord, status ApprovalStatus, now time.Time) error {
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
		if err := r.put(tx, rec.Thread, now, approvalCardItem(ap)); err != nil {
			return err
		}
	}
	return nil
}

// respond gives a run that waits for input its answer (text from who) or, with no text, the
// go-ahead to continue, and stores it.
func (r *records) respond(tx Tx, rec *RunRecord, text, who string) error {
	prev := rec.Status
	if err := rec.State.Respond(text, who); err != nil {
		return err
	}
	deriveStatus(rec)
	return r.transition(tx, rec, prev)
}

// cancel cancels a run that no goroutine is advancing, closes its approvals and stores it
// with what the transition calls for.
func (r *records) cancel(tx Tx, rec *RunRecord, reason string, now time.Time) error {
	prev := rec.Status
	if err := rec.State.Cancel(reason, now); err != nil {
		return err
	}
	deriveStatus(rec)
	if err := r.closeApprovals(tx, rec, ApprovalCancelled, now); err != nil {
		return err
	}
	return r.transition(tx, rec, prev)
}

// cancelUnlessEnded cancels run id unless it has already ended.
func (r *records) cancelUnlessEnded(tx Tx, id, reason string) error {
	rec, err := tx.Run(id)
	if err != nil || rec.Status.Terminal() {
		return err
	}
	return r.cancel(tx, rec, reason, r.clock.stamp())
}

// fail ends run id, which the loop could not advance (a state that does not validate, a
// store that refused a checkpoint), unless it has already ended, so that it is not retried
// forever and the thread moves on.
func (r *records) fail(tx Tx, id string) error {
	rec, err := tx.Run(id)
	if err != nil {
		return err
	}
	if rec.Status.Terminal() {
		return nil
	}
	prev := rec.Status
	now := r.clock.stamp()
	if err := rec.State.Fail(failedReason, now); err != nil {
		return err
	}
	deriveStatus(rec)
	if err := r.closeApprovals(tx, rec, ApprovalCancelled, now); err != nil {
		return err
	}
	return r.transition(tx, rec, prev)
}

// touch writes run id unchanged but for its time, to see whether the store takes writes.
func (r *records) touch(tx Tx, id string) error {
	rec, err := tx.Run(id)
	if err != nil {
		return err
	}
	rec.UpdatedAt = r.clock.stamp()
	return tx.PutRun(rec)
}
