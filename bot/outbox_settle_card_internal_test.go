package bot

import (
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// cardTx is a transaction over one stored run and an outbox that holds the items in held,
// counting the runs it was asked to read.
type cardTx struct {
	Tx      // nil: only the methods below are used
	held    map[string]OutboxItem
	rec     *RunRecord
	reads   int
	deleted []string
}

func (tx *cardTx) RunBrief(id string) (*RunRecord, error) {
	tx.reads++
	return tx.rec, nil
}

func (tx *cardTx) Approval(id string) (*Approval, error) {
	return nil, ErrNotFound
}

func (tx *cardTx) DeleteOutbox(key string) error {
	tx.deleted = append(tx.deleted, key)
	return nil
}

// holderTx is a cardTx that can tell whether the outbox holds an item as listed.
type holderTx struct{ *cardTx }

func (tx holderTx) OutboxHolds(it OutboxItem) (bool, error) {
	h, ok := tx.held[it.Key]
	return ok && reflect.DeepEqual(h, it), nil
}

// TestSettlingASentCardRendersItAgainOnlyWhenTheStoreCannotTell checks that settling a
// status card the outbox still holds as it was listed takes it out without rendering it
// again, that one put again since stays without being rendered (it goes again, rendered
// then), and that another kind of edited item, or a card on a store that cannot tell, is
// rendered again and kept when it no longer shows what was sent.
func TestSettlingASentCardRendersItAgainOnlyWhenTheStoreCannotTell(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	st := agent.NewState("run-1", "look around", nil, t0)
	st.Status = agent.StatusRunning
	rec := &RunRecord{ID: "run-1", Thread: ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, Status: agent.StatusRunning, State: st, CreatedAt: t0}
	card := OutboxItem{Key: "card/run-1", Kind: OutboxCard, RunID: "run-1", Thread: rec.Thread, CreatedAt: t0}
	putAgain := card
	putAgain.CreatedAt = t0.Add(time.Second)
	approval := OutboxItem{Key: "approval/a1", Kind: OutboxApprovalCard, RunID: "run-1", ApprovalID: "a1", Thread: rec.Thread, CreatedAt: t0}
	sent := Message{Kind: KindStatus, Text: "what the worker rendered before the run moved on"}
	tests := []struct {
		name      string
		holder    bool
		it        OutboxItem
		held      OutboxItem
		wantReads int
		wantGone  bool
	}{
		{"held as listed", true, card, card, 0, true},
		{"put again since", true, card, putAgain, 0, false},
		{"a store that cannot tell", false, card, card, 1, false},
		// Rendered again; the approval is gone here, so the item goes too.
		{"an approval card held as listed", true, approval, approval, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := &cardTx{held: map[string]OutboxItem{tt.held.Key: tt.held}, rec: rec}
			var tx Tx = ctx
			if tt.holder {
				tx = holderTx{ctx}
			}
			if err := settleSent(tx, result{job: job{it: tt.it}, outcome: outcomeSent, msg: sent}); err != nil {
				t.Fatal(err)
			}
			if ctx.reads != tt.wantReads {
				t.Errorf("the run was read %d times, want %d", ctx.reads, tt.wantReads)
			}
			if gone := len(ctx.deleted) == 1; gone != tt.wantGone {
				t.Errorf("item taken out: %v, want %v", gone, tt.wantGone)
			}
		})
	}
}
