package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// scheduler works on runs: it starts a goroutine for every run stored as queued or running,
// oldest first, up to MaxConcurrentRuns, and each goroutine advances its run with the agent
// loop, saving every checkpoint through records. Its lock guards only its maps: no store or
// network call is made under it.
type scheduler struct {
	store   Store
	agent   *agent.Agent
	recs    *records
	log     *slog.Logger
	maxRuns int
	// gcMemoryMB is the bot's Config.GCMemoryMB, which the pacer is told with every run
	// that starts or ends (gcpacer.go).
	gcMemoryMB int
	// wake nudges the loop; it has room for one, so a nudge never blocks and many nudges
	// fold into one pass.
	wake chan struct{}
	// sent is told that the outbox has new items.
	sent func()
	// ask puts a tool's question to the run's thread (Bot.ask); nil in tests of the
	// scheduler alone.
	ask func(ctx context.Context, runID, callID string, q agent.Question) (agent.Answer, error)
	// streams shows runs' answers as they are written (stream.go); nil streams nothing.
	streams *streams
	// own holds the leases of the runs this replica works on (lease.go); nil for a store
	// without leases, where this process owns every run.
	own *ownership
	// beatDue is set by the heartbeat's tick: the next pass also checks that the runs this
	// replica works on have not ended elsewhere.
	beatDue atomic.Bool

	runs sync.WaitGroup // run goroutines

	mu      sync.Mutex
	stopped bool
	// base is the loop's context, which every run goroutine's derives from; nil until the
	// bot starts (begin). reserved counts the slots kept for runs being created here (handoff.go),
	// which count against maxRuns as running ones do.
	base     context.Context
	reserved int
	// readyIDs is the loop's buffer for the runs it may start (ready); only the loop's
	// goroutine uses it.
	readyIDs []string
	// running holds the cancel function of every run goroutine, by run ID.
	running map[string]context.CancelCauseFunc
	// held are runs that failed in a way retrying cannot fix and that could not be marked
	// failed either, or whose saves fail; they are left alone until released.
	held map[string]bool
	// saveFailures counts the failed saves in a row of each run, for retryDelay.
	saveFailures map[string]int
	// loadFailures counts the failed loads in a row of each run, for retryDelay: the probe
	// that releases a held run is a write, which a store may take while the run's record
	// still does not load (a damaged one), and the run must not be loaded again at every pass.
	loadFailures map[string]int
	// unsaved holds, for each run whose last checkpoint the store refused, why: a store
	// may take a small write (a lease, an ack) while it refuses a run's larger one, so the
	// store's own last error alone does not tell whether runs are stuck.
	unsaved map[string]error
	// holds counts the times each run was held after a failed save, so that a retry timer
	// of an earlier hold does nothing (heldprobe.go).
	holds map[string]int
	// early are the runs held after their first failed save, by when they were held, which
	// the loop probes at its passes until storeRetry has gone by (heldprobe.go); probing
	// are those it probes now.
	early   map[string]time.Time
	probing map[string]bool
}

func newScheduler(store Store, ag *agent.Agent, recs *records, log *slog.Logger, maxRuns int, sent func()) *scheduler {
	return &scheduler{
		store:        store,
		agent:        ag,
		recs:         recs,
		log:          log,
		maxRuns:      maxRuns,
		wake:         make(chan struct{}, 1),
		sent:         sent,
		running:      map[string]context.CancelCauseFunc{},
		held:         map[string]bool{},
		saveFailures: map[string]int{},
		loadFailures: map[string]int{},
		unsaved:      map[string]error{},
		holds:        map[string]int{},
		early:        map[string]time.Time{},
		probing:      map[string]bool{},
	}
}

// poke wakes the loop without blocking.
func (s *scheduler) poke() { poke(s.wake) }

// poke sends on a wake channel of room one without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// loop launches a goroutine for every run that is queued or running in the store and has
// none yet, oldest first, up to maxRuns at once. It is woken whenever that may have
// changed: a run was created, decided on, answered, or a run goroutine ended.
func (s *scheduler) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		// Only the IDs: this runs on every wake, and loading the runs (their states are tens
		// of kilobytes) cost more than everything else the bot did with many runs going.
		ready, err := s.ready(ctx)
		if err != nil {
			s.log.Error("list runs to start", "err", err)
			continue
		}
		s.probeEarly()
		s.mu.Lock()
		for _, id := range ready {
			if s.stopped || len(s.running)+s.reserved >= s.maxRuns {
				break
			}
			if s.running[id] != nil || s.held[id] {
				continue
			}
			s.spawn(id)
		}
		s.mu.Unlock()
	}
}

// spawn starts a goroutine working on run id. s.mu is held, s.base is set, and no goroutine
// works on the run.
func (s *scheduler) spawn(id string) {
	runCtx, cancel := context.WithCancelCause(s.base)
	s.running[id] = cancel
	s.runs.Add(1)
	go s.work(runCtx, id)
}

// begin gives the scheduler the context its run goroutines derive from, before its loop
// starts and before any event can hand it a run.
func (s *scheduler) begin(ctx context.Context) {
	s.mu.Lock()
	s.base = ctx
	s.mu.Unlock()
}

// stop cancels every run goroutine with errShutdown, which leaves each run resumable, and
// starts no more.
func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, cancel := range s.running {
		cancel(errShutdown)
	}
}

// isRunning reports whether a goroutine works on run id.
func (s *scheduler) isRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] != nil
}

// interrupt cancels the goroutine working on run id with cause, and reports whether there
// was one.
func (s *scheduler) interrupt(id string, cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cancel := s.running[id]
	if cancel != nil {
		cancel(cause)
	}
	return cancel != nil
}

// work advances one run until it pauses, ends or the bot stops. It loads the run afresh
// after it was registered as running, so a cancel that reached the store first is seen.
func (s *scheduler) work(ctx context.Context, id string) {
	pacer.started(s.gcMemoryMB)
	defer pacer.ended(s.gcMemoryMB)
	defer func() {
		s.mu.Lock()
		s.running[id](nil)
		delete(s.running, id)
		s.mu.Unlock()
		s.finished(ctx, id)
		s.runs.Done()
		s.poke()
	}()
	// What the loop asks at its first step boundary is read with the run, after the count
	// of the writes that change it (boundary.go).
	var rec *RunRecord
	bd := newBoundary(s.store, id, ThreadRef{})
	seen := bd.count()
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if rec, err = tx.Run(id); err != nil {
			return err
		}
		bd.thread = rec.Thread
		return bd.seed(tx, rec, seen)
	})
	if err == nil && rec.State == nil {
		err = errors.New("run has no state")
	}
	if err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.loadFailures[id]++
			n := s.loadFailures[id]
			s.mu.Unlock()
			s.log.Error("load run", "run", id, "failures", n, "err", err)
			s.hold(id, n)
		}
		return
	}
	s.mu.Lock()
	delete(s.loadFailures, id)
	s.mu.Unlock()
	s.log.Info("run started", "run", id, "thread", rec.Thread.Key(), "status", rec.State.Status, "step", rec.State.Step)
	// No Observer: cards are rendered from stored state only, and the loop checkpoints
	// before every call with side effects, so the card shows a running tool anyway.
	// s.checkpoint may be called from another goroutine than the run's: it keeps nothing of
	// the run but in maps under s.mu.
	hooks := agent.Hooks{Checkpoint: s.checkpoint, Steer: bd.steer, Ask: s.ask, Autonomy: bd.autonomy,
		Grants: s.channelGrants(rec.Thread), Hold: bd.hold, SaveAhead: true}
	stream := s.streams.open(rec)
	if stream != nil {
		// A stream's state is the run goroutine's alone: its checkpoints are written there.
		hooks.SaveAhead = false
		hooks.Text = stream.text
		hooks.Checkpoint = func(ctx context.Context, st *agent.State) error {
			if err := s.checkpoint(ctx, st); err != nil {
				return err
			}
			stream.checkpointed(ctx, st)
			return nil
		}
	}
	err = s.agent.Run(ctx, rec.State, hooks)
	stream.end(ctx, rec.State)
	if !errors.Is(err, agent.ErrCheckpoint) {
		// The run is no longer waiting to be saved, whatever became of it.
		s.mu.Lock()
		delete(s.unsaved, id)
		s.mu.Unlock()
	}
	switch {
	case errors.Is(err, ErrFenced) || errors.Is(context.Cause(ctx), ErrFenced):
		// Another replica took the run over: what it does now is the run's, and this
		// goroutine writes nothing more, not even a failure.
		s.log.Warn("run taken over by another replica; stopped working on it", "run", id, "err", err)
		return
	case err == nil:
		s.mu.Lock()
		delete(s.saveFailures, id)
		s.mu.Unlock()
		logRunStop(s.log, id, rec.State)
	case errors.Is(context.Cause(ctx), errShutdown):
		s.log.Info("run interrupted by shutdown; it resumes on the next start", "run", id)
	case errors.Is(err, errRunEnded):
		s.log.Info("run ended elsewhere while it started", "run", id)
	case errors.Is(err, agent.ErrCheckpoint):
		// The store refused a write (a full disk, say): nothing more was done, and the
		// last saved state is sound. The run waits, as saved, until the store takes a
		// write again, instead of failing for a condition that passes.
		s.mu.Lock()
		s.saveFailures[id]++
		n := s.saveFailures[id]
		s.held[id] = true
		s.holds[id]++
		hold := s.holds[id]
		if n == 1 {
			s.early[id] = time.Now()
		}
		s.mu.Unlock()
		s.log.Error("run could not be saved; it resumes from its last saved step once the store takes writes again", "run", id, "failures", n, "err", err)
		s.retryHeld(id, hold, retryDelay(n))
		return
	default:
		s.log.Error("run failed", "run", id, "err", err)
		if ferr := s.failRun(context.WithoutCancel(ctx), id); ferr != nil {
			s.log.Error("mark run failed", "run", id, "err", ferr)
			s.hold(id, 1)
		}
		return
	}
	if errors.Is(context.Cause(ctx), agent.ErrCancelled) {
		// The cancel may have come as the loop was returning (say, into a pause) and so
		// gone unseen by it. The run is still registered here, so nothing restarts it
		// before it is cancelled in the store.
		if err := s.settleCancel(context.WithoutCancel(ctx), id, "Cancelled by a person."); err != nil {
			s.log.Error("cancel run", "run", id, "err", err)
		}
	}
}

// logRunStop says at info level where a run stopped: waiting for an approval (naming the
// tools), paused (with the reason the thread shows), or finished with its status.
func logRunStop(log *slog.Logger, id string, st *agent.State) {
	log = log.With("run", id, "status", st.Status, "step", st.Step)
	switch {
	case st.Status == agent.StatusAwaitingApproval:
		var tools []string
		for _, c := range st.PendingApprovals() {
			tools = append(tools, c.Name)
		}
		log.Info("run waiting for approval", "tools", strings.Join(tools, ","))
	case st.Pause != nil:
		log.Info("run paused", "pause", st.Pause.Kind, "reason", st.Pause.Reason)
	case st.Status.Terminal():
		log.Info("run finished")
	default:
		log.Info("run stopped")
	}
}

// checkpoint is the loop's hook: it saves the run's state and the outbox items its
// transition calls for, in one transaction, and wakes the dispatcher to send them. A store
// that can encodes the state here first, in the run's goroutine, so that the transaction,
// which may wait for and hold the store's one writer, has less to do.
func (s *scheduler) checkpoint(ctx context.Context, st *agent.State) error {
	var enc EncodedState
	if e, ok := s.store.(StateEncoder); ok {
		var err error
		if enc, err = e.EncodeState(st); err != nil {
			return fmt.Errorf("save run: %w", err)
		}
	}
	write := s.write
	if st.Status.Terminal() {
		write = s.writeLast
	}
	if err := write(ctx, st.RunID, func(tx Tx) error { return s.recs.checkpoint(tx, st, enc) }); err != nil {
		if !errors.Is(err, ErrFenced) && ctx.Err() == nil {
			s.mu.Lock()
			s.unsaved[st.RunID] = err
			s.mu.Unlock()
		}
		return fmt.Errorf("save run: %w", err)
	}
	s.mu.Lock()
	delete(s.unsaved, st.RunID)
	s.mu.Unlock()
	s.sent()
	return nil
}

// saveError returns why a run's last checkpoint was refused, if some run's was and it has
// not been saved since; nil otherwise.
func (s *scheduler) saveError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.unsaved {
		return err
	}
	return nil
}

// settleCancel cancels a run in the store unless it has already ended. It needs no lease:
// a cancel may be written by any replica, and the owner's next fenced checkpoint finds the
// run ended (errRunEnded).
func (s *scheduler) settleCancel(ctx context.Context, id, reason string) error {
	err := s.store.Update(ctx, func(tx Tx) error { return s.recs.cancelUnlessEnded(tx, id, reason) })
	if err != nil {
		return fmt.Errorf("settle cancel of run %s: %w", id, err)
	}
	s.sent()
	return nil
}

// failRun marks a run the loop could not advance failed, so that it is not retried forever
// and the thread moves on.
func (s *scheduler) failRun(ctx context.Context, id string) error {
	if err := s.write(ctx, id, func(tx Tx) error { return s.recs.fail(tx, id) }); err != nil {
		return fmt.Errorf("fail run %s: %w", id, err)
	}
	s.sent()
	return nil
}

// hold keeps run id from being started again until a write of its record succeeds: its
// load, or the write that would have failed it, did not reach the store, which a store
// that is down explains; n is how many times in a row that happened. Like a run whose save
// failed, it is probed at the scheduler's passes after its first failure, then after
// retryDelay(n), and released once the store takes the write; a run held for good would
// keep its lease, renewed, and never be worked by any replica.
func (s *scheduler) hold(id string, n int) {
	s.mu.Lock()
	s.held[id] = true
	s.holds[id]++
	hold := s.holds[id]
	if n == 1 {
		s.early[id] = time.Now()
	}
	s.mu.Unlock()
	s.retryHeld(id, hold, retryDelay(n))
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

// retryHeld releases a run held by a failed save (its hold-th) once a write of its record
// succeeds, trying every delay until then, until the bot stops or until the run was
// released otherwise (an early probe). The probe is a write, not a resume, so that a store
// that still refuses writes costs no model call.
func (s *scheduler) retryHeld(id string, hold int, delay time.Duration) {
	time.AfterFunc(delay, func() {
		s.mu.Lock()
		stale := s.stopped || !s.held[id] || s.holds[id] != hold
		s.mu.Unlock()
		if stale {
			return
		}
		if err := s.probe(id, delay); err != nil {
			s.log.Warn("held run: the store still refuses writes", "run", id, "err", err)
			s.retryHeld(id, hold, delay)
			return
		}
		s.release(id, hold)
	})
}
