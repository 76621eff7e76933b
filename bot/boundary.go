package bot

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/loopbot/loopbot/agent"
)

// Step boundaries.
//
// At every step boundary the loop asks who asked the run to pause (agent.Hooks.Hold), what
// people said to it (Hooks.Steer) and its channel's autonomy level (Hooks.Autonomy). Each
// was a read transaction of its own: three a step for every working run, and with a
// thousand runs stepping together the pause check alone, a run head decoded to learn that
// nobody asked, was a twentieth of the bot's CPU. A run's boundary reads all three in one
// transaction. On a store that counts the writes that change them (BoundaryCounter: bbolt,
// all of whose writers are in this process) it reads only when the count moved since its
// last read, which the run's load also serves as: a burst of runs reads nothing at its
// boundaries, and a pause pressed on any bot of the process still stops the run at the
// next one. A store other processes write too (PostgreSQL) is read at every boundary, since
// a pause asked on another replica must stop the run at its next boundary as well.

// BoundaryCounter is a Store every write of which is made in this process through this
// handle, and which counts the committed transactions that wrote something a working run
// reads at its step boundaries: a run's head or record with PauseBy set, a conversation
// with notes, a channel's autonomy level (or one of those records removed). The count moves
// only after such a write is visible to a transaction that begins. A store that other
// processes write must not implement it.
type BoundaryCounter interface {
	BoundaryWrites() uint64
}

// boundaryView is what a working run reads at its step boundaries.
type boundaryView struct {
	pauseBy string
	notes   []RunNote // the run's own, in order
	level   agent.Level
}

// The parts of a boundaryView, one hook each.
const (
	partPause = 1 << iota
	partNotes
	partLevel
	allParts = partPause | partNotes | partLevel
)

// boundary answers one run goroutine's boundary hooks from one read of the store. Its lock
// guards only its fields: the read is made outside it. The executors of a planned run ask
// for the autonomy level from their own goroutines.
type boundary struct {
	store   Store
	counter BoundaryCounter // nil: the store is read at every boundary
	id      string
	thread  ThreadRef

	mu   sync.Mutex
	view boundaryView
	// seen is the counter's count when view was read, and read whether it was at all.
	seen uint64
	read bool
	// unused are the parts of view that no hook has answered with yet: without a counter, a
	// part asked for a second time since the last read is read afresh, so that each hook
	// sees the store as it is at its boundary while the three hooks of a boundary share one
	// read.
	unused int
}

func newBoundary(s Store, id string, thread ThreadRef) *boundary {
	c, _ := s.(BoundaryCounter)
	return &boundary{store: s, counter: c, id: id, thread: thread}
}

// count returns the counter's count, to take before a read that seeds the boundary.
func (b *boundary) count() uint64 {
	if b.counter == nil {
		return 0
	}
	return b.counter.BoundaryWrites()
}

// seed gives the boundary what the run's load read in tx, the counter having counted seen
// before that transaction began, so that its first boundary need not read again. Without a
// counter it does nothing: a replica's pause may commit between the load and the boundary.
func (b *boundary) seed(tx Tx, rec *RunRecord, seen uint64) error {
	if b.counter == nil {
		return nil
	}
	v, err := readBoundaryRest(tx, b.thread, b.id)
	if err != nil {
		return err
	}
	v.pauseBy = rec.PauseBy
	b.mu.Lock()
	b.view, b.seen, b.read, b.unused = v, seen, true, 0
	b.mu.Unlock()
	return nil
}

// current returns the view for a hook that answers with part.
func (b *boundary) current(ctx context.Context, part int) (boundaryView, error) {
	b.mu.Lock()
	fresh := b.unused&part != 0
	if b.counter != nil {
		fresh = b.read && b.counter.BoundaryWrites() == b.seen
	}
	if fresh {
		b.unused &^= part
		v := b.view
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	seen := b.count()
	var v boundaryView
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		v, err = readBoundary(tx, b.thread, b.id)
		return err
	})
	if err != nil {
		return boundaryView{}, err
	}
	b.mu.Lock()
	b.view, b.seen, b.read, b.unused = v, seen, true, allParts&^part
	b.mu.Unlock()
	return v, nil
}

// readBoundary reads what run id in thread asks at its step boundary.
func readBoundary(tx Tx, thread ThreadRef, id string) (boundaryView, error) {
	v, err := readBoundaryRest(tx, thread, id)
	if err != nil {
		return v, err
	}
	rec, err := tx.RunHeader(id)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return v, err
	default:
		v.pauseBy = rec.PauseBy
	}
	return v, nil
}

// readBoundaryRest reads the parts of a boundaryView that are not in the run's record.
func readBoundaryRest(tx Tx, thread ThreadRef, id string) (boundaryView, error) {
	var v boundaryView
	conv, err := tx.Conversation(thread)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return v, err
	default:
		v.notes = slices.DeleteFunc(conv.Notes, func(n RunNote) bool { return n.RunID != id })
	}
	v.level, err = channelLevel(tx, thread, "")
	return v, err
}

// hold is the loop's Hooks.Hold: who asked the run to pause.
func (b *boundary) hold(ctx context.Context) (string, error) {
	v, err := b.current(ctx, partPause)
	return v.pauseBy, err
}

// steer is the loop's Hooks.Steer: the notes for the run after number after.
func (b *boundary) steer(ctx context.Context, after int) ([]agent.Note, error) {
	v, err := b.current(ctx, partNotes)
	if err != nil {
		return nil, err
	}
	var out []agent.Note
	for _, n := range v.notes {
		if n.Seq > after {
			out = append(out, agent.Note{Seq: n.Seq, From: n.From, Text: n.Text, Sanity: n.Sanity})
		}
	}
	return out, nil
}

// autonomy is the loop's Hooks.Autonomy: the channel's level, "" for the configured one.
func (b *boundary) autonomy(ctx context.Context) (agent.Level, error) {
	v, err := b.current(ctx, partLevel)
	return v.level, err
}
