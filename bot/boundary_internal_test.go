package bot

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// boundaryStore is a Store that holds one run's head, its thread's conversation and the
// channel's level, and counts its read transactions.
type boundaryStore struct {
	mu    sync.Mutex
	views int
	head  RunRecord
	conv  *Conversation
	level *ChannelAutonomy
}

func (s *boundaryStore) Update(ctx context.Context, fn func(tx Tx) error) error {
	return errors.New("no writes here")
}

func (s *boundaryStore) View(ctx context.Context, fn func(tx Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views++
	return fn(boundaryTx{s: s})
}

func (s *boundaryStore) ClaimEvent(context.Context, string, time.Time, time.Duration) (bool, error) {
	return true, nil
}
func (s *boundaryStore) PurgeEvents(context.Context, time.Time) (int, error) { return 0, nil }
func (s *boundaryStore) Close() error                                        { return nil }

// set changes what the store holds, as a committed write does.
func (s *boundaryStore) set(fn func(s *boundaryStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *boundaryStore) viewCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.views
}

// countedStore is a boundaryStore that counts the writes a boundary reads, as bbolt does.
type countedStore struct {
	*boundaryStore
	count uint64
}

func (s *countedStore) BoundaryWrites() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// boundaryTx answers the three reads of a boundary; the embedded Tx is nil, so anything else
// panics.
type boundaryTx struct {
	Tx
	s *boundaryStore
}

func (t boundaryTx) RunHeader(id string) (*RunRecord, error) {
	if id != t.s.head.ID {
		return nil, ErrNotFound
	}
	h := t.s.head
	return &h, nil
}

func (t boundaryTx) Conversation(thread ThreadRef) (*Conversation, error) {
	if t.s.conv == nil {
		return nil, ErrNotFound
	}
	c := *t.s.conv
	c.Notes = append([]RunNote(nil), c.Notes...)
	return &c, nil
}

func (t boundaryTx) ChannelAutonomy(thread ThreadRef) (*ChannelAutonomy, error) {
	if t.s.level == nil {
		return nil, ErrNotFound
	}
	ca := *t.s.level
	return &ca, nil
}

// atBoundary asks what a loop asks at a step boundary: the pause, the notes after after, the level.
func atBoundary(t *testing.T, b *boundary, after int) (string, []agent.Note, agent.Level) {
	t.Helper()
	by, err := b.hold(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	notes, err := b.steer(t.Context(), after)
	if err != nil {
		t.Fatal(err)
	}
	level, err := b.autonomy(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return by, notes, level
}

var boundaryThread = ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}

func newBoundaryStore() *boundaryStore {
	return &boundaryStore{head: RunRecord{ID: "r1", Thread: boundaryThread},
		conv: &Conversation{Thread: boundaryThread, Notes: []RunNote{{Seq: 1, RunID: "other", Text: "not for r1"}}}}
}

// A store shared with other processes is read once a boundary, for its three hooks
// together, and at every boundary: a pause written between two boundaries is seen at the
// second.
func TestBoundaryReadsASharedStoreAtEveryBoundary(t *testing.T) {
	s := newBoundaryStore()
	b := newBoundary(s, "r1", boundaryThread)
	if b.counter != nil {
		t.Fatal("a store without a count is taken for one with")
	}
	for i := range 3 {
		if by, notes, level := atBoundary(t, b, 0); by != "" || len(notes) != 0 || level != "" {
			t.Fatalf("boundary %d: pause %q, notes %v, level %q from an idle store", i, by, notes, level)
		}
		if got := s.viewCount(); got != i+1 {
			t.Fatalf("%d reads after %d boundaries, want one each", got, i+1)
		}
	}
	s.set(func(s *boundaryStore) {
		s.head.PauseBy = "ann"
		s.conv.Notes = append(s.conv.Notes, RunNote{Seq: 2, RunID: "r1", From: "bob", Text: "use main"})
		s.level = &ChannelAutonomy{Level: agent.LevelCareful}
	})
	by, notes, level := atBoundary(t, b, 0)
	if by != "ann" || len(notes) != 1 || notes[0].Text != "use main" || level != agent.LevelCareful {
		t.Fatalf("after the writes: pause %q, notes %v, level %q", by, notes, level)
	}
	// Each hook asked twice in a row reads again: what it answered was used.
	s.set(func(s *boundaryStore) { s.head.PauseBy = "" })
	if by, err := b.hold(t.Context()); err != nil || by != "" {
		t.Fatalf("the pause asked again: %q, %v; the store no longer has it", by, err)
	}
}

// A store that counts the writes a boundary reads is read only when the count moved since
// the last read; the run's load seeds the first boundary.
func TestBoundaryReadsACountedStoreWhenTheCountMoves(t *testing.T) {
	s, b := seededBoundary(t, "")
	for i := range 3 {
		if by, notes, level := atBoundary(t, b, 0); by != "" || len(notes) != 0 || level != "" {
			t.Fatalf("boundary %d: pause %q, notes %v, level %q from an idle store", i, by, notes, level)
		}
	}
	if got := s.viewCount(); got != 1 {
		t.Fatalf("%d reads for the load and three boundaries, want only the load's", got)
	}
	s.set(func(s *boundaryStore) { s.head.PauseBy = "ann" })
	if by, _, _ := atBoundary(t, b, 0); by != "" {
		t.Fatalf("pause %q seen with the count unmoved: the boundary read again", by)
	}
	s.set(func(s *boundaryStore) {
		s.conv.Notes = append(s.conv.Notes, RunNote{Seq: 2, RunID: "r1", From: "bob", Text: "use main"})
	})
	s.mu.Lock()
	s.count++
	s.mu.Unlock()
	by, notes, _ := atBoundary(t, b, 0)
	if by != "ann" || len(notes) != 1 {
		t.Fatalf("after the count moved: pause %q, notes %v", by, notes)
	}
	if notes, _ := b.steer(t.Context(), 2); len(notes) != 0 {
		t.Fatalf("notes after the last one taken: %v", notes)
	}
	if got := s.viewCount(); got != 2 {
		t.Fatalf("%d reads, want the load's and one after the count moved", got)
	}
}

// The load seeds the pause a run was asked for before its goroutine started.
func TestBoundarySeedKeepsTheLoadedPause(t *testing.T) {
	_, b := seededBoundary(t, "ann")
	if by, _, _ := atBoundary(t, b, 0); by != "ann" {
		t.Fatalf("pause %q, want the one the run was loaded with", by)
	}
}

// seededBoundary is the boundary of run r1 on a store that counts its boundary writes, seeded
// as the run's load seeds it, the run loaded with pauseBy.
func seededBoundary(t *testing.T, pauseBy string) (*countedStore, *boundary) {
	t.Helper()
	s := &countedStore{boundaryStore: newBoundaryStore()}
	b := newBoundary(s, "r1", boundaryThread)
	seen := b.count()
	if err := s.View(t.Context(), func(tx Tx) error {
		return b.seed(tx, &RunRecord{ID: "r1", Thread: boundaryThread, PauseBy: pauseBy}, seen)
	}); err != nil {
		t.Fatal(err)
	}
	return s, b
}
