package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Run items.
//
// A run's state grows with every step: the conversation with the model and the record of
// every tool call. Stored as one value, a 50-step run would rewrite the whole of it, tens of
// kilobytes, at every checkpoint, so the bytes written would grow with the square of the
// run's length. So the state's two growing lists, Messages and Calls, are kept apart, one
// record per element in run_items, and a checkpoint writes only the elements that are new
// or changed since the last one: a step's new messages and the calls it touched. The runs
// bucket keeps the rest of the state.
//
// Each element is encoded and compared with what is stored under its key, so an element
// changed in place is written again like a new one: the saving needs no promise from the
// agent that older elements stay as they were.

// Kinds of run item: the byte after the run key.
const (
	itemMessage byte = 'm'
	itemCall    byte = 'c'
)

// itemKeyLen is the length of a run_items key: the run's key, the kind and the index.
const itemKeyLen = runKeyLen + 1 + 4

// itemKey is the run_items key of element i of a run's list of kind.
func itemKey(runKey []byte, kind byte, i int) []byte {
	k := make([]byte, 0, itemKeyLen)
	k = append(k, runKey...)
	k = append(k, kind)
	return binary.BigEndian.AppendUint32(k, uint32(i))
}

// splitState returns a copy of st without its messages and calls, which PutRun stores as
// run items; st itself is not changed. An empty list stays as it was (nil or empty), so
// that the run reads back exactly as it was put.
func splitState(st *agent.State) *agent.State {
	rest := *st
	if rest.Messages != nil {
		rest.Messages = []agent.Message{}
	}
	rest.Calls = nil
	return &rest
}

// putItems stores list, the encoded run's items of kind, writing only the elements that
// differ from the stored ones, and deleting stored elements past its end. The stored ones
// are read with one cursor walk, not a lookup each: the walk is done before any write, since
// bbolt's cursors do not survive a change of their bucket.
func putItems(items *bolt.Bucket, runKey []byte, kind byte, list [][]byte) error {
	prefix := itemKey(runKey, kind, 0)[:runKeyLen+1]
	var changed []int
	n := 0 // stored elements walked, each at its index
	c := items.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < len(list); k, v = c.Next() {
		if len(k) != itemKeyLen || int(binary.BigEndian.Uint32(k[runKeyLen+1:])) != n {
			break // a broken sequence: what was not walked is written whole
		}
		if !bytes.Equal(v, list[n]) {
			changed = append(changed, n)
		}
		n++
	}
	for i := n; i < len(list); i++ {
		changed = append(changed, i)
	}
	for _, i := range changed {
		if err := items.Put(itemKey(runKey, kind, i), list[i]); err != nil {
			return fmt.Errorf("item %c%d: %w", kind, i, err)
		}
	}
	return deleteItems(items, runKey, kind, len(list))
}

// deleteItems deletes the run's items of kind from index from on.
func deleteItems(items *bolt.Bucket, runKey []byte, kind byte, from int) error {
	prefix := itemKey(runKey, kind, 0)[:runKeyLen+1]
	c := items.Cursor()
	for k, _ := c.Seek(itemKey(runKey, kind, from)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(itemKey(runKey, kind, from)) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("delete item %x: %w", k, err)
		}
	}
	return nil
}

// loadItems reads the run's items of kind in order. Their indexes must run from 0 without
// a gap: a missing element would silently shorten the conversation.
func loadItems[T any](items *bolt.Bucket, runKey []byte, kind byte, what string) ([]T, error) {
	prefix := itemKey(runKey, kind, 0)[:runKeyLen+1]
	var out []T
	c := items.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != itemKeyLen || int(binary.BigEndian.Uint32(k[runKeyLen+1:])) != len(out) {
			return nil, fmt.Errorf("%s: item key %x out of sequence at element %d", what, k, len(out))
		}
		var e T
		if err := unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("decode %s item %c%d: %w", what, kind, len(out), err)
		}
		out = append(out, e)
	}
	return out, nil
}

// putRunItems stores the messages and calls of an encoded state under the run's key; a
// nil state has none.
func putRunItems(items *bolt.Bucket, runKey []byte, enc *encodedState) error {
	var msgs, calls [][]byte
	if enc != nil {
		msgs, calls = enc.msgs, enc.calls
	}
	if err := putItems(items, runKey, itemMessage, msgs); err != nil {
		return err
	}
	return putItems(items, runKey, itemCall, calls)
}

// loadRunItems fills r's state with its calls, and its messages when withMessages is set,
// where it has any stored as items.
func loadRunItems(items *bolt.Bucket, runKey []byte, r *bot.RunRecord, withMessages bool) error {
	if r.State == nil {
		return nil
	}
	what := "run " + r.ID
	if withMessages {
		msgs, err := loadItems[agent.Message](items, runKey, itemMessage, what)
		if err != nil {
			return err
		}
		if len(msgs) > 0 {
			r.State.Messages = msgs
		}
	}
	calls, err := loadItems[agent.CallRecord](items, runKey, itemCall, what)
	if err != nil {
		return err
	}
	if len(calls) > 0 {
		r.State.Calls = calls
	}
	return nil
}

// splitRuns moves the messages and calls of every run's state into run_items, for a file
// written before they were kept apart. The runs' heads do not change: they hold no state.
func splitRuns(btx *bolt.Tx) error {
	runs, items := btx.Bucket(bucketRuns), btx.Bucket(bucketRunItems)
	type move struct {
		key, data []byte
		enc       *encodedState
	}
	var moves []move
	err := runs.ForEach(func(key, data []byte) error {
		r, err := decode[bot.RunRecord](data, fmt.Sprintf("run %x", key))
		if err != nil {
			return err
		}
		if r.State == nil {
			return nil
		}
		enc, err := encodeState(r.State)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		r.State = nil
		rest, err := json.Marshal(&runWire{RunRecord: r, State: enc.rest})
		if err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		moves = append(moves, move{key: bytes.Clone(key), data: rest, enc: enc})
		return nil
	})
	if err != nil {
		return err
	}
	// Written after the walk: bbolt does not allow a bucket to change under its ForEach.
	for _, m := range moves {
		if err := runs.Put(m.key, m.data); err != nil {
			return fmt.Errorf("run %x: %w", m.key, err)
		}
		if err := putRunItems(items, m.key, m.enc); err != nil {
			return fmt.Errorf("run %x: %w", m.key, err)
		}
	}
	return nil
}

// checkRunItems checks that every run item belongs to a stored run, decodes, and stands in
// an unbroken sequence from index 0 for its run and kind.
func checkRunItems(btx *bolt.Tx) error {
	runs, items := btx.Bucket(bucketRuns), btx.Bucket(bucketRunItems)
	if runs == nil || items == nil {
		return fmt.Errorf("run buckets missing")
	}
	var prefix []byte // run key and kind of the sequence being walked
	next := 0
	return items.ForEach(func(k, v []byte) error {
		if len(k) != itemKeyLen || (k[runKeyLen] != itemMessage && k[runKeyLen] != itemCall) {
			return fmt.Errorf("run item key %x is not a run key, a kind and an index", k)
		}
		if !bytes.Equal(k[:runKeyLen+1], prefix) {
			if runs.Get(k[:runKeyLen]) == nil {
				return fmt.Errorf("run item %x names no run", k)
			}
			prefix, next = bytes.Clone(k[:runKeyLen+1]), 0
		}
		if i := int(binary.BigEndian.Uint32(k[runKeyLen+1:])); i != next {
			return fmt.Errorf("run %x: item %c%d follows %d items: the sequence is broken", k[:runKeyLen], k[runKeyLen], i, next)
		}
		next++
		var err error
		if k[runKeyLen] == itemMessage {
			_, err = decode[agent.Message](v, fmt.Sprintf("run item %x", k))
		} else {
			_, err = decode[agent.CallRecord](v, fmt.Sprintf("run item %x", k))
		}
		return err
	})
}
