package bot

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// ErrStopped is returned by Handle once Stop was called.
var ErrStopped = errors.New("bot stopped")

// errShutdown is the cause run contexts are cancelled with when the bot stops. Unlike
// agent.ErrCancelled it leaves the run resumable: the loop checkpoints and returns.
var errShutdown = errors.New("loopbot is shutting down")

// Bot turns events into runs and runs into messages. Build it with New, call Start, feed it
// events with Handle, and Stop it.
type Bot struct {
	cfg       Config
	store     Store
	agent     *agent.Agent
	platforms map[string]Platform
	now       func() time.Time
	log       *slog.Logger
	newID     func() string
	redactor  *Redactor
	// decided is told of every stored approval decision (WithDecisionHook).
	decided func(outcome ApprovalStatus, wait time.Duration)

	// wakeRuns and wakeOutbox nudge the scheduler and the dispatcher; both are buffered with
	// room for one, so a nudge never blocks and many nudges fold into one pass.
	wakeRuns   chan struct{}
	wakeOutbox chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
	// running holds the cancel function of every run goroutine, by run ID.
	running map[string]context.CancelCauseFunc
	// held are runs that failed in a way retrying cannot fix and that could not be marked
	// failed either; they are left alone until the next process.
	held map[string]bool
	// saveFailures counts the failed saves in a row of each run, for retryDelay.
	saveFailures map[string]int
	stopLoops    context.CancelCauseFunc
	stopOutbox   context.CancelCauseFunc
	flush        chan struct{} // closed by Stop: the dispatcher makes a last pass and returns
	outboxDone   chan struct{}
	runs         sync.WaitGroup // run goroutines
	loops        sync.WaitGroup // scheduler and sweeper

	stampMu sync.Mutex
	last    time.Time
}

// Option configures a Bot.
type Option func(*Bot)

// WithClock sets the clock of record timestamps and approval expiry. Pacing and retry waits
// use timers (which testing/synctest fakes), since they are about real time between calls.
func WithClock(now func() time.Time) Option { return func(b *Bot) { b.now = now } }

// WithLogger sets the logger for the details a chat user never sees.
func WithLogger(l *slog.Logger) Option { return func(b *Bot) { b.log = l } }

// WithDecisionHook sets a function told of every approval decision after it is stored:
// approved, rejected or expired, and how long the request waited. The command feeds its
// metrics from it. It is called outside any transaction and must not block.
func WithDecisionHook(fn func(outcome ApprovalStatus, wait time.Duration)) Option {
	return func(b *Bot) { b.decided = fn }
}

// WithIDs sets the generator of run, approval and button IDs. IDs must be unique, opaque
// and at most 64 characters, so that they fit a Slack action value and a Discord custom_id.
func WithIDs(newID func() string) Option { return func(b *Bot) { b.newID = newID } }

// NewID returns a random opaque ID: 20 bytes from crypto/rand in lowercase base32, 32
// characters. It cannot be guessed, so a forged button finds nothing.
func NewID() string {
	var b [20]byte
	rand.Read(b[:]) // never fails, per crypto/rand
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// New builds a Bot. The platforms are looked up by Name when a message goes to a thread.
func New(cfg Config, store Store, ag *agent.Agent, platforms []Platform, opts ...Option) (*Bot, error) {
	switch {
	case store == nil:
		return nil, errors.New("new bot: no store")
	case ag == nil:
		return nil, errors.New("new bot: no agent")
	}
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	b := &Bot{
		cfg:          cfg.Defaults(),
		store:        store,
		agent:        ag,
		platforms:    make(map[string]Platform, len(platforms)),
		now:          time.Now,
		log:          slog.Default(),
		newID:        NewID,
		wakeRuns:     make(chan struct{}, 1),
		wakeOutbox:   make(chan struct{}, 1),
		running:      map[string]context.CancelCauseFunc{},
		held:         map[string]bool{},
		saveFailures: map[string]int{},
		flush:        make(chan struct{}),
		outboxDone:   make(chan struct{}),
	}
	for _, p := range platforms {
		if _, dup := b.platforms[p.Name()]; dup {
			return nil, fmt.Errorf("new bot: two platforms are named %q", p.Name())
		}
		b.platforms[p.Name()] = p
	}
	for _, o := range opts {
		o(b)
	}
	if b.decided == nil {
		b.decided = func(ApprovalStatus, time.Duration) {}
	}
	b.redactor = NewRedactor(b.cfg.Redact)
	return b, nil
}

// Start recovers what the last process left and starts the background work: runs that were
// queued or running resume from their last checkpoint, paused runs keep waiting (their
// buttons still work, since everything they bind is stored), approvals that expired while
// the bot was down are expired, and the outbox is sent. ctx's values reach every run; its
// end does not stop the bot (Stop does).
func (b *Bot) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.stopped {
		return errors.New("start bot: already started")
	}
	if err := b.refreshCards(ctx); err != nil {
		return fmt.Errorf("start bot: %w", err)
	}
	b.started = true
	base := context.WithoutCancel(ctx)
	loopCtx, stopLoops := context.WithCancelCause(base)
	outCtx, stopOutbox := context.WithCancelCause(base)
	b.stopLoops, b.stopOutbox = stopLoops, stopOutbox
	b.loops.Add(2)
	go func() { defer b.loops.Done(); b.schedule(loopCtx) }()
	go func() { defer b.loops.Done(); b.sweep(loopCtx) }()
	go func() { defer close(b.outboxDone); b.dispatch(outCtx) }()
	b.poke(b.wakeRuns)
	b.poke(b.wakeOutbox)
	return nil
}

// Stop stops taking events, interrupts the runs (each saves its state and resumes in the
// next process), waits for them, and gives the dispatcher until ctx ends to empty the
// outbox, paced as always. What is left is sent by the next process. The store stays open:
// it belongs to the caller.
func (b *Bot) Stop(ctx context.Context) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	started := b.started
	for _, cancel := range b.running {
		cancel(errShutdown)
	}
	b.mu.Unlock()
	if !started {
		return nil
	}
	b.stopLoops(errShutdown)
	waited := make(chan struct{})
	go func() { b.runs.Wait(); b.loops.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("stop bot: runs still saving: %w", context.Cause(ctx))
	}
	close(b.flush)
	select {
	case <-b.outboxDone:
	case <-ctx.Done():
		b.stopOutbox(errShutdown)
		<-b.outboxDone
		if err == nil {
			err = fmt.Errorf("stop bot: outbox not flushed: %w", context.Cause(ctx))
		}
	}
	b.stopOutbox(errShutdown)
	return err
}

// refreshCards queues an edit of the status card of every run that is not over and of the
// card of every pending approval. The cards are rendered from the store, so they show the
// state the new process starts from, and a platform that lost its view of a thread while
// loopbot was down (the web console keeps its threads in memory) gets it back with working
// buttons. Editing a card that is already up to date changes nothing a person sees.
func (b *Bot) refreshCards(ctx context.Context) error {
	return b.store.Update(ctx, func(tx Tx) error {
		runs, err := tx.Runs(RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning, agent.StatusAwaitingApproval, agent.StatusAwaitingInput}})
		if err != nil {
			return err
		}
		now := b.stamp()
		for _, rec := range runs {
			if err := b.putOutbox(tx, rec.Thread, now, OutboxItem{Key: "card/" + rec.ID, Kind: OutboxCard, RunID: rec.ID}); err != nil {
				return err
			}
		}
		pending, err := tx.Approvals("")
		if err != nil {
			return err
		}
		for _, ap := range pending {
			if err := b.putOutbox(tx, ap.Thread, now, OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: ap.RunID, ApprovalID: ap.ID}); err != nil {
				return err
			}
		}
		return nil
	})
}

// poke nudges a background loop without blocking.
func (b *Bot) poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// stamp is the clock's time, made strictly later than the last stamp, so that records
// written in one instant (or under a frozen test clock) still sort in the order written.
func (b *Bot) stamp() time.Time {
	b.stampMu.Lock()
	defer b.stampMu.Unlock()
	t := b.now().UTC()
	if !t.After(b.last) {
		t = b.last.Add(time.Nanosecond)
	}
	b.last = t
	return t
}
