package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// errRunEnded stops a run goroutine whose run was ended by someone else (a cancel that
// reached the store while the goroutine was starting): its checkpoint must not undo that.
var errRunEnded = errors.New("run already ended")

// schedule launches a goroutine for every run that is queued or running in the store and has
// none yet, oldest first, up to MaxConcurrentRuns at once. It is woken whenever that may have
// changed: a run was created, decided on, answered, or a run goroutine ended.
func (b *Bot) schedule(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wakeRuns:
		}
		// Only the IDs: this runs on every wake, and loading the runs (their states are tens
		// of kilobytes) cost more than everything else the bot did with many runs going.
		var ready []string
		err := b.store.View(ctx, func(tx Tx) error {
			var err error
			ready, err = tx.RunIDs(RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning}})
			return err
		})
		if err != nil {
			b.log.Error("list runs to start", "err", err)
			continue
		}
		b.mu.Lock()
		for _, id := range ready {
			if b.stopped || len(b.running) >= b.cfg.MaxConcurrentRuns {
				break
			}
			if b.running[id] != nil || b.held[id] {
				continue
			}
			runCtx, cancel := context.WithCancelCause(ctx)
			b.running[id] = cancel
			b.runs.Add(1)
			go b.work(runCtx, id)
		}
		b.mu.Unlock()
	}
}

// work advances one run until it pauses, ends or the bot stops. It loads the run afresh
// after it was registered as running, so a cancel that reached the store first is seen.
func (b *Bot) work(ctx context.Context, id string) {
	defer func() {
		b.mu.Lock()
		b.running[id](nil)
		delete(b.running, id)
		b.mu.Unlock()
		b.runs.Done()
		b.poke(b.wakeRuns)
	}()
	var rec *RunRecord
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		rec, err = tx.Run(id)
		return err
	})
	if err == nil && rec.State == nil {
		err = errors.New("run has no state")
	}
	if err != nil {
		if ctx.Err() == nil {
			b.log.Error("load run", "run", id, "err", err)
			b.hold(id)
		}
		return
	}
	// No Observer: cards are rendered from stored state only, and the loop checkpoints
	// before every call with side effects, so the card shows a running tool anyway.
	err = b.agent.Run(ctx, rec.State, agent.Hooks{Checkpoint: b.checkpoint})
	if err == nil {
		b.mu.Lock()
		delete(b.saveFailures, id)
		b.mu.Unlock()
	}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errShutdown):
		b.log.Info("run interrupted by shutdown; it resumes on the next start", "run", id)
	case errors.Is(err, errRunEnded):
		b.log.Info("run ended elsewhere while it started", "run", id)
	case errors.Is(err, agent.ErrCheckpoint):
		// The store refused a write (a full disk, say): nothing more was done, and the
		// last saved state is sound. The run waits, as saved, until the store takes a
		// write again, instead of failing for a condition that passes.
		b.mu.Lock()
		b.saveFailures[id]++
		n := b.saveFailures[id]
		b.mu.Unlock()
		b.log.Error("run could not be saved; it resumes from its last saved step once the store takes writes again", "run", id, "failures", n, "err", err)
		b.hold(id)
		b.retryHeld(id, retryDelay(n))
		return
	default:
		b.log.Error("run failed", "run", id, "err", err)
		if ferr := b.failRun(context.WithoutCancel(ctx), id); ferr != nil {
			b.log.Error("mark run failed", "run", id, "err", ferr)
			b.hold(id)
		}
		return
	}
	if errors.Is(context.Cause(ctx), agent.ErrCancelled) {
		// The cancel may have come as the loop was returning (say, into a pause) and so
		// gone unseen by it. The run is still registered here, so nothing restarts it
		// before it is cancelled in the store.
		if err := b.settleCancel(context.WithoutCancel(ctx), id); err != nil {
			b.log.Error("cancel run", "run", id, "err", err)
		}
	}
}

// settleCancel cancels a run in the store unless it has already ended.
func (b *Bot) settleCancel(ctx context.Context, id string) error {
	err := b.store.Update(ctx, func(tx Tx) error {
		rec, err := tx.Run(id)
		if err != nil || rec.Status.Terminal() {
			return err
		}
		return b.cancelInTx(tx, rec, "Cancelled by a person.", b.stamp())
	})
	if err != nil {
		return fmt.Errorf("settle cancel of run %s: %w", id, err)
	}
	b.poke(b.wakeOutbox)
	return nil
}

func (b *Bot) hold(id string) {
	b.mu.Lock()
	b.held[id] = true
	b.mu.Unlock()
}

// storeRetry is how long a run held by a failed save first waits before the store is tried
// again; see retryDelay.
const storeRetry = 10 * time.Second

// retryDelay is the wait before the store is tried again for a run whose saves failed n times
// in a row: storeRetry three times, then doubling up to five minutes. A store that takes a
// small write but not the run's next save would otherwise cost a model call every storeRetry.
func retryDelay(n int) time.Duration {
	d := storeRetry
	for i := 3; i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// retryHeld releases a run held by a failed save once a write of its record succeeds, trying
// every delay until then or until the bot stops. The probe is a write, not a resume, so
// that a store that still refuses writes costs no model call.
func (b *Bot) retryHeld(id string, delay time.Duration) {
	time.AfterFunc(delay, func() {
		b.mu.Lock()
		stopped := b.stopped
		b.mu.Unlock()
		if stopped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), delay)
		defer cancel()
		err := b.store.Update(ctx, func(tx Tx) error {
			rec, err := tx.Run(id)
			if err != nil {
				return err
			}
			rec.UpdatedAt = b.stamp()
			return tx.PutRun(rec)
		})
		if err != nil {
			b.log.Warn("held run: the store still refuses writes", "run", id, "err", err)
			b.retryHeld(id, delay)
			return
		}
		b.log.Info("held run: the store takes writes again; resuming", "run", id)
		b.mu.Lock()
		delete(b.held, id)
		b.mu.Unlock()
		b.poke(b.wakeRuns)
	})
}

// checkpoint saves the run's state and the outbox items its transition calls for, in one
// transaction, and wakes the dispatcher to send them. It reads the stored run without its
// state, which it replaces, unless the state has calls of unknown outcome, which are told
// about by comparing with the stored state: the write lock is held meanwhile, and decoding
// a state of tens of kilobytes at every step would hold it longest.
func (b *Bot) checkpoint(ctx context.Context, st *agent.State) error {
	err := b.store.Update(ctx, func(tx Tx) error {
		rec, err := tx.RunHeader(st.RunID)
		if err != nil {
			return err
		}
		if rec.Status.Terminal() {
			return errRunEnded
		}
		var old *agent.State
		if slices.ContainsFunc(st.Calls, func(c agent.CallRecord) bool { return c.Status == agent.CallUnknown }) {
			stored, err := tx.Run(st.RunID)
			if err != nil {
				return err
			}
			old = stored.State
		}
		prev := rec.Status
		rec.State, rec.Status = st, st.Status
		if err := b.tellUnknownOutcomes(tx, rec, old); err != nil {
			return err
		}
		return b.transition(tx, rec, prev)
	})
	if err != nil {
		return fmt.Errorf("save run: %w", err)
	}
	b.poke(b.wakeOutbox)
	return nil
}

// tellUnknownOutcomes tells the thread about each call that a previous process left
// running and that the loop has just marked as having an unknown outcome (it is not idempotent,
// so it was not run again): the model is told in its tool result, and the people who may have
// to check the call's effects are told here.
func (b *Bot) tellUnknownOutcomes(tx Tx, rec *RunRecord, old *agent.State) error {
	was := map[string]agent.CallStatus{}
	if old != nil {
		for _, c := range old.Calls {
			was[c.ID] = c.Status
		}
	}
	for _, c := range rec.State.Calls {
		if c.Status != agent.CallUnknown || was[c.ID] == agent.CallUnknown {
			continue
		}
		text := fmt.Sprintf("loopbot stopped while %s was running and did not run it again, since it may have had effects. Check what it did before asking for it again.", "`"+c.Name+"`")
		if err := b.putOutbox(tx, rec.Thread, b.stamp(), OutboxItem{Key: "notice/" + b.newID(), Kind: OutboxNotice, RunID: rec.ID, Text: text}); err != nil {
			return err
		}
	}
	return nil
}

// transition stores rec, whose state moved from prev, with what the move calls for: a
// refreshed status card always; approval requests, a question, the answer or a failure
// summary when the status changed; and the thread's next goal when the run ended.
func (b *Bot) transition(tx Tx, rec *RunRecord, prev agent.Status) error {
	now := b.stamp()
	rec.UpdatedAt = now
	st := rec.State
	items := []OutboxItem{{Key: "card/" + rec.ID, Kind: OutboxCard, RunID: rec.ID}}
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
			ap, err := b.requestApproval(tx, rec, c, now)
			if err != nil {
				return err
			}
			items = append(items, OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: rec.ID, ApprovalID: ap.ID})
		}
	case rec.Status == prev:
	case rec.Status == agent.StatusAwaitingInput:
		text := st.Pause.Reason
		if st.Pause.Kind == agent.PauseAskUser {
			text = st.Pause.Question
		} else {
			rec.ContinueAction, rec.StopAction = b.newID(), b.newID()
			for id, kind := range map[string]ActionKind{rec.ContinueAction: ActionContinue, rec.StopAction: ActionStop} {
				if err := tx.PutAction(&Action{ID: id, Kind: kind, RunID: rec.ID}); err != nil {
					return err
				}
			}
		}
		items = append(items, OutboxItem{Key: "question/" + rec.ID + "/" + b.newID(), Kind: OutboxQuestion, RunID: rec.ID, Text: text})
	case rec.Status == agent.StatusCompleted:
		items = append(items, OutboxItem{Key: "answer/" + rec.ID, Kind: OutboxAnswer, RunID: rec.ID})
	case rec.Status.Terminal():
		items = append(items, OutboxItem{Key: "failure/" + rec.ID, Kind: OutboxFailure, RunID: rec.ID})
	}
	if err := tx.PutRun(rec); err != nil {
		return err
	}
	if err := b.putOutbox(tx, rec.Thread, now, items...); err != nil {
		return err
	}
	if rec.Status.Terminal() && prev != rec.Status {
		return b.nextGoal(tx, rec.Thread)
	}
	return nil
}

// requestApproval stores an approval request for call c and the actions of its buttons.
func (b *Bot) requestApproval(tx Tx, rec *RunRecord, c agent.CallRecord, now time.Time) (*Approval, error) {
	ap := &Approval{
		ID:            b.newID(),
		RunID:         rec.ID,
		CallID:        c.ID,
		Tool:          c.Name,
		ArgsHash:      c.ArgsHash,
		Risk:          c.Risk,
		Thread:        rec.Thread,
		Requester:     rec.Requester,
		ApproveAction: b.newID(),
		RejectAction:  b.newID(),
		Status:        ApprovalPending,
		CreatedAt:     now,
		ExpiresAt:     now.Add(time.Duration(b.cfg.Policy.ApprovalExpiry)),
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

// putOutbox stores items for thread, stamped in order.
func (b *Bot) putOutbox(tx Tx, thread ThreadRef, now time.Time, items ...OutboxItem) error {
	for i, it := range items {
		it.Thread = thread
		it.CreatedAt = now.Add(time.Duration(i))
		if err := tx.PutOutbox(it); err != nil {
			return err
		}
	}
	return nil
}

// newRun stores a queued run of goal in conv's thread, with the thread's earlier goals and
// answers as history, and makes it the thread's active run. The caller stores conv.
func (b *Bot) newRun(tx Tx, conv *Conversation, requester User, goal string) (*RunRecord, error) {
	var history []agent.Message
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
	now := b.stamp()
	id := b.newID()
	rec := &RunRecord{
		ID:           id,
		Thread:       conv.Thread,
		Requester:    requester,
		Status:       agent.StatusQueued,
		State:        agent.NewState(id, goal, history, now),
		CancelAction: b.newID(),
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	if err := tx.PutAction(&Action{ID: rec.CancelAction, Kind: ActionCancel, RunID: id}); err != nil {
		return nil, err
	}
	if err := tx.PutRun(rec); err != nil {
		return nil, err
	}
	conv.Runs = append(conv.Runs, id)
	conv.Active = id
	return rec, b.putOutbox(tx, conv.Thread, now, OutboxItem{Key: "card/" + id, Kind: OutboxCard, RunID: id})
}

// nextGoal clears the thread's active run and queues the first goal waiting behind it as a
// new run; the scheduler starts it once it is woken after the commit.
func (b *Bot) nextGoal(tx Tx, thread ThreadRef) error {
	conv, err := tx.Conversation(thread)
	if err != nil {
		return err
	}
	conv.Active = ""
	if len(conv.Queue) > 0 {
		q := conv.Queue[0]
		conv.Queue = conv.Queue[1:]
		if _, err := b.newRun(tx, conv, q.User, q.Text); err != nil {
			return err
		}
	}
	return tx.PutConversation(conv)
}

// failRun ends a run the loop could not advance (a state that does not validate, a store
// that refused a checkpoint), so that it is not retried forever and the thread moves on.
func (b *Bot) failRun(ctx context.Context, id string) error {
	err := b.store.Update(ctx, func(tx Tx) error {
		rec, err := tx.Run(id)
		if err != nil {
			return err
		}
		if rec.Status.Terminal() {
			return nil
		}
		prev := rec.Status
		rec.State.Status, rec.State.Pause = agent.StatusFailed, nil
		rec.State.Error = "loopbot hit an internal error and stopped this run."
		rec.Status = agent.StatusFailed
		if err := b.closeApprovals(tx, rec, ApprovalCancelled, b.stamp()); err != nil {
			return err
		}
		return b.transition(tx, rec, prev)
	})
	if err != nil {
		return fmt.Errorf("fail run %s: %w", id, err)
	}
	b.poke(b.wakeOutbox)
	return nil
}
