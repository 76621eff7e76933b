package postgres

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Run items.
//
// As in the bbolt store (store/runitems.go), a run's messages and call records are kept
// apart from its record, one row each in run_items, and a checkpoint writes only the
// elements whose encoding differs from the stored one: PutRun reads the SHA-256 of each
// stored element (computed by PostgreSQL, so the elements themselves do not travel), and
// sends the changed elements and the deletion of those past the lists' ends in one batch.
// The bytes a run's checkpoints write then grow with its length, not with its square.

// Kinds of run item.
const (
	itemMessage = 'm'
	itemCall    = 'c'
)

// splitState returns a copy of st without its messages and calls. An empty list stays as
// it was (nil or empty), so that the run reads back exactly as it was put.
func splitState(st *agent.State) *agent.State {
	rest := *st
	if rest.Messages != nil {
		rest.Messages = []agent.Message{}
	}
	rest.Calls = nil
	return &rest
}

type itemKey struct {
	kind byte
	idx  int
}

// putItems writes the state's messages and calls of run id that changed since they were
// stored, and deletes those past the lists' ends, queued for the transaction's next round
// trip (pipeline.go). The run's row is locked by then (its
// upsert), so no other transaction writes the same run's items meanwhile.
func (t *tx) putItems(id string, st *agent.State) error {
	rows, err := t.query("SELECT kind, idx, sha256(data) FROM run_items WHERE run_id = $1", id)
	if t.note(err) != nil {
		return err
	}
	stored := map[itemKey][]byte{}
	var kind byte
	var idx int
	var sum []byte
	_, err = pgx.ForEachRow(rows, []any{&kind, &idx, &sum}, func() error {
		stored[itemKey{kind, idx}] = bytes.Clone(sum)
		return nil
	})
	if t.note(err) != nil {
		return err
	}
	var msgs []agent.Message
	var calls []agent.CallRecord
	if st != nil {
		msgs, calls = st.Messages, st.Calls
	}
	queue := func(kind byte, i int, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("item %c%d: %w", kind, i, err)
		}
		if s := sha256.Sum256(data); bytes.Equal(stored[itemKey{kind, i}], s[:]) {
			return nil
		}
		t.queue(`INSERT INTO run_items (run_id, kind, idx, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (run_id, kind, idx) DO UPDATE SET data = EXCLUDED.data`, id, kind, i, data)
		return nil
	}
	for i := range msgs {
		if err := queue(itemMessage, i, &msgs[i]); err != nil {
			return err
		}
	}
	for i := range calls {
		if err := queue(itemCall, i, &calls[i]); err != nil {
			return err
		}
	}
	for _, k := range []struct {
		kind byte
		n    int
	}{{itemMessage, len(msgs)}, {itemCall, len(calls)}} {
		if _, ok := stored[itemKey{k.kind, k.n}]; ok {
			t.queue("DELETE FROM run_items WHERE run_id = $1 AND kind = $2 AND idx >= $3", id, k.kind, k.n)
		}
	}
	return nil
}

// loadItems fills the states of runs (by ID) with their calls, and their messages when
// withMessages is set, in one query. Each list's indexes must run from 0 without a gap: a
// missing element would silently shorten the conversation.
func (t *tx) loadItems(runs map[string]*bot.RunRecord, withMessages bool) error {
	var ids []string
	for id, r := range runs {
		if r.State != nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := t.query(itemsQuery(withMessages), ids)
	if t.note(err) != nil {
		return err
	}
	return t.readItems(runs, rows)
}

// itemsQuery selects the calls, and the messages when withMessages is set, of the runs $1
// names, in order.
func itemsQuery(withMessages bool) string {
	kinds := "'c'"
	if withMessages {
		kinds = "'c', 'm'"
	}
	return "SELECT run_id, kind, idx, data FROM run_items WHERE run_id = ANY($1) AND kind IN (" + kinds + ") ORDER BY run_id, kind, idx"
}

// readItems fills the states of runs from rows of itemsQuery.
func (t *tx) readItems(runs map[string]*bot.RunRecord, rows pgx.Rows) error {
	var id string
	var kind byte
	var idx int
	var data []byte
	var decodeErr error
	_, err := pgx.ForEachRow(rows, []any{&id, &kind, &idx, &data}, func() error {
		r := runs[id]
		if r == nil || r.State == nil {
			return nil // a run stored without a state keeps no items to read
		}
		st := r.State
		var err error
		switch kind {
		case itemMessage:
			err = appendItem(&st.Messages, idx, data)
		case itemCall:
			err = appendItem(&st.Calls, idx, data)
		default:
			err = fmt.Errorf("unknown kind %q", kind)
		}
		if err != nil {
			decodeErr = fmt.Errorf("run %s item %c%d: %w", id, kind, idx, err)
			return decodeErr
		}
		return nil
	})
	if err != nil && decodeErr == nil {
		t.note(err)
	}
	return err
}

// appendItem decodes element idx of a list and appends it, checking it comes next. The
// split state holds an empty list where the run had an empty one; it is filled from 0.
func appendItem[T any](list *[]T, idx int, data []byte) error {
	if idx != len(*list) {
		return fmt.Errorf("out of sequence after %d elements", len(*list))
	}
	var e T
	if err := json.Unmarshal(data, &e); err != nil {
		return err
	}
	*list = append(*list, e)
	return nil
}
