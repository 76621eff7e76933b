package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestBoundaryWritesCountWhatABoundaryReads: the count moves with every committed
// transaction that asks a run to pause, writes a note or sets a channel's level, only once
// it has committed, and not for the writes a run's steps make, nor for a transaction rolled
// back.
func TestBoundaryWritesCountWhatABoundaryReads(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	rec := benchRun()
	conv := &bot.Conversation{Thread: rec.Thread, Runs: []string{rec.ID}, Active: rec.ID}
	if err := db.Update(t.Context(), func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(rec), tx.PutConversation(conv))
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	for _, tc := range []struct {
		name  string
		fn    func(tx bot.Tx) error
		err   error
		moves bool
	}{
		{"a checkpoint", func(tx bot.Tx) error { return tx.PutRun(rec) }, nil, false},
		{"a card's reference", func(tx bot.Tx) error {
			h, err := tx.RunHeader(rec.ID)
			if err != nil {
				return err
			}
			h.Card.ID = "another"
			return tx.PutRunHead(h)
		}, nil, false},
		{"a conversation without notes", func(tx bot.Tx) error { return tx.PutConversation(conv) }, nil, false},
		{"a pause asked", func(tx bot.Tx) error {
			h, err := tx.RunHeader(rec.ID)
			if err != nil {
				return err
			}
			h.PauseBy = "ann"
			return tx.PutRunHead(h)
		}, nil, true},
		{"a checkpoint of a run asked to pause", func(tx bot.Tx) error {
			r := *rec
			r.PauseBy = "ann"
			return tx.PutRun(&r)
		}, nil, true},
		{"a note", func(tx bot.Tx) error {
			c := *conv
			c.NoteSeq, c.Notes = 1, []bot.RunNote{{Seq: 1, RunID: rec.ID, From: "ann", Text: "use the other file"}}
			return tx.PutConversation(&c)
		}, nil, true},
		{"a channel's level", func(tx bot.Tx) error {
			return tx.PutChannelAutonomy(&bot.ChannelAutonomy{Platform: rec.Thread.Platform, Workspace: rec.Thread.Workspace,
				Channel: rec.Thread.Channel, Level: agent.LevelCareful})
		}, nil, true},
		{"a note rolled back", func(tx bot.Tx) error {
			c := *conv
			c.NoteSeq, c.Notes = 2, []bot.RunNote{{Seq: 2, RunID: rec.ID, From: "ann", Text: "stop"}}
			if err := tx.PutConversation(&c); err != nil {
				return err
			}
			return refused
		}, refused, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := db.BoundaryWrites()
			err := db.Update(t.Context(), func(tx bot.Tx) error {
				err := tc.fn(tx)
				if got := db.BoundaryWrites(); got != before {
					t.Errorf("the count moved from %d to %d before the commit", before, got)
				}
				return err
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("update: %v, want %v", err, tc.err)
			}
			if moved := db.BoundaryWrites() != before; moved != tc.moves {
				t.Errorf("count moved: %t, want %t", moved, tc.moves)
			}
		})
	}
}
