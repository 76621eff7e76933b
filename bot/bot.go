package bot

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
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
//
// Bot is the front door. Behind it each concurrent role is a type of its own, with its own
// state: Handle (handle.go) answers events, the scheduler (scheduler.go) works on runs, the
// dispatcher (dispatcher.go) sends the outbox and the sweeper (sweeper.go) expires
// approvals. Every rule they apply inside a store transaction is in records (records.go).
type Bot struct {
	cfg       Config
	store     Store
	platforms map[string]Platform
	log       *slog.Logger
	redactor  *Redactor
	clock     *clock
	recs      *records
	// decided is told of every stored approval decision (WithDecisionHook).
	decided func(outcome ApprovalStatus, wait time.Duration)

	sched *scheduler
	disp  *dispatcher
	sweep *sweeper
	// lead elects the replica that runs the dispatcher and the sweeper (leader.go).
	lead *leader
	// pres tells the replicas which of them are alive (presence.go).
	pres presence
	// notes wakes other replicas through the store, if it notifies (notifier.go).
	notes *notifier
	// asks are the tool calls waiting on a question in their thread (ask.go).
	asks questions
	// inbox remembers the events accepted and not yet handled (inbox.go).
	inbox inbox

	// The options, until New has applied them.
	now   func() time.Time
	newID func() string
	// toolNames are the agent's tools, which a playbook may name.
	toolNames []string
	// hasSanity is set when the agent has a sanity model to ask.
	hasSanity bool

	loops      sync.WaitGroup // the scheduler's and the sweeper's loops
	stopLoops  context.CancelCauseFunc
	stopOutbox context.CancelCauseFunc

	// mu guards the lifecycle flags only.
	mu      sync.Mutex
	started bool
	stopped bool
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

// NewID returns an opaque ID of 32 characters: the time in nanoseconds (8 bytes, big-endian)
// and 12 bytes from crypto/rand, in lowercase base32hex. The 96 random bits cannot be
// guessed, so a forged button finds nothing. The time first makes IDs made later sort
// later, in the store's keys as in time: a burst of runs then writes to the same few pages
// of each bucket instead of to pages all over its tree (a fifth to a quarter fewer bytes of
// pages written in loopbench's makespan scenario).
func NewID() string {
	var b [20]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	rand.Read(b[8:]) // never fails, per crypto/rand
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// idEncoding is base32hex, whose alphabet is in the order of its values, so that the IDs
// sort as their bytes do.
var idEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

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
		cfg:       cfg.Defaults(),
		store:     store,
		platforms: make(map[string]Platform, len(platforms)),
		now:       time.Now,
		log:       slog.Default(),
		newID:     NewID,
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
	b.toolNames = ag.ToolNames()
	b.hasSanity = ag.HasSanity()
	b.clock = &clock{now: b.now}
	expiry := time.Duration(b.cfg.Policy.ApprovalExpiry)
	b.recs = &records{clock: b.clock, newID: b.newID, expiry: expiry, log: b.log, level: ag.Config().Autonomy, savePlaybooks: b.cfg.Playbooks.Dir != ""}
	b.disp = newDispatcher(store, b.platforms, b.redactor, b.log, time.Duration(b.cfg.EditInterval), b.clock.Now)
	b.sched = newScheduler(store, ag, b.recs, b.log, b.cfg.MaxConcurrentRuns, b.outboxChanged)
	b.sched.gcMemoryMB = b.cfg.GCMemoryMB
	b.sched.ask = b.ask
	b.sched.streams = &streams{platforms: b.platforms, redactor: b.redactor, now: b.clock.Now, log: b.log}
	b.sweep = newSweeper(store, b.recs, b.log, expiry, b.decided, func() { b.sched.poke(); b.disp.poke() })
	b.replicate(store)
	return b, nil
}

// Start recovers what the last process left and starts the background work: runs that were
// queued or running resume from their last checkpoint, paused runs keep waiting (their
// buttons still work, since everything they bind is stored), approvals that expired while
// the bot was down are expired, and the outbox is sent. ctx's values reach every run; its
// end does not stop the bot (Stop does).
func (b *Bot) Start(ctx context.Context) error {
	b.mu.Lock()
	busy := b.started || b.stopped
	b.mu.Unlock()
	if busy {
		return errors.New("start bot: already started")
	}
	// The refresh is done before the bot counts as started, with no lock held: queueing the
	// same card edits twice (two Starts racing) changes nothing.
	if err := b.store.Update(ctx, b.recs.refreshCards); err != nil {
		return fmt.Errorf("start bot: %w", err)
	}
	if err := b.pres.announce(ctx); err != nil {
		return fmt.Errorf("start bot: announce this replica: %w", err)
	}
	if err := b.replayInbox(ctx, true); err != nil {
		return fmt.Errorf("start bot: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.stopped {
		return errors.New("start bot: already started")
	}
	b.started = true
	base := context.WithoutCancel(ctx)
	loopCtx, stopLoops := context.WithCancelCause(base)
	outCtx, stopOutbox := context.WithCancelCause(base)
	b.stopLoops, b.stopOutbox = stopLoops, stopOutbox
	// The election is asked before the dispatcher's first pass, so that a replica alone
	// (always, on bbolt) sends the outbox at once.
	b.lead.holds(ctx)
	b.sched.begin(loopCtx)
	b.loops.Add(8)
	go func() { defer b.loops.Done(); b.sched.loop(loopCtx) }()
	go func() { defer b.loops.Done(); b.sweep.loop(loopCtx) }()
	go func() { defer b.loops.Done(); b.sched.beat(loopCtx) }()
	go func() { defer b.loops.Done(); b.lead.loop(loopCtx) }()
	go func() {
		defer b.loops.Done()
		pollOutbox(loopCtx, b.lead, b.outboxPoll(), b.disp.poke)
	}()
	go func() { defer b.loops.Done(); b.notes.send(loopCtx, b.log.Warn) }()
	go func() { defer b.loops.Done(); b.listen(loopCtx) }()
	go func() { defer b.loops.Done(); b.presenceLoop(loopCtx) }()
	go func() { defer close(b.disp.done); b.disp.loop(outCtx) }()
	b.sched.poke()
	b.disp.poke()
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
	b.mu.Unlock()
	b.sched.stop()
	if !started {
		return nil
	}
	b.stopLoops(errShutdown)
	waited := make(chan struct{})
	go func() { b.sched.runs.Wait(); b.loops.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("stop bot: runs still saving: %w", context.Cause(ctx))
	}
	close(b.disp.flush)
	select {
	case <-b.disp.done:
	case <-ctx.Done():
		b.stopOutbox(errShutdown)
		<-b.disp.done
		if err == nil {
			err = fmt.Errorf("stop bot: outbox not flushed: %w", context.Cause(ctx))
		}
	}
	b.stopOutbox(errShutdown)
	// What this replica owned is given up, so other replicas take it at once.
	b.sched.releaseAll(ctx)
	b.lead.resign(ctx)
	b.pres.leave(ctx, b.pres.owner)
	return err
}

// SaveError returns why the store refused a run's last checkpoint, if it refused one and the
// run has not been saved since: the run waits, as last saved, until the store takes its
// write. A health check reports it, since the store may meanwhile take smaller writes.
func (b *Bot) SaveError() error { return b.sched.saveError() }
