package bot_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// journalStore is the bbolt store with its AcceptInbox watched.
type journalStore struct {
	*store.DB
	calls [][]string
}

func (s *journalStore) AcceptInbox(ctx context.Context, replica string, seq int64, evs []bot.Event) ([]bool, error) {
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	s.calls = append(s.calls, ids)
	return s.DB.AcceptInbox(ctx, replica, seq, evs)
}

type noModel struct{}

func (noModel) Complete(context.Context, agent.Request) (agent.Reply, error) {
	return agent.Reply{}, errors.New("no model here")
}

// TestAcceptUsesTheStoresIntake checks that Accept hands a batch to a store that makes it
// durable on its own (the bbolt store's intake journal) in one call, and remembers what it
// added as a transaction's accept does.
func TestAcceptUsesTheStoresIntake(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"), store.WithIntake())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &journalStore{DB: db}
	ag, err := agent.New(agent.Config{}, noModel{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{}, s, ag, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := []bot.Event{
		{Kind: bot.EventMention, ID: "ev-a", Thread: thread, User: ann, Text: "first"},
		{Kind: bot.EventMention, ID: "ev-b", Thread: thread, User: ann, Text: "second"},
		{Kind: bot.EventMention, ID: "ev-a", Thread: thread, User: ann, Text: "first"},
	}
	added, err := b.Accept(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}
	if len(s.calls) != 1 || !slices.Equal(s.calls[0], []string{"ev-a", "ev-b", "ev-a"}) {
		t.Errorf("AcceptInbox calls %q, want the batch once", s.calls)
	}
	var seqs []int64
	err = s.View(t.Context(), func(tx bot.Tx) error {
		es, err := tx.Inbox()
		for _, e := range es {
			seqs = append(seqs, e.Seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[1] != seqs[0]+1 {
		t.Errorf("inbox seqs %v, want two in a row", seqs)
	}
}
