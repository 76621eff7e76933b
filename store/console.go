package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The web console's view (adapters/web, viewstore.go): rows the console writes, each under a
// thread and a key, numbered by one sequence in the order they were written, so that every
// console sharing the store reads what changed since the last number it saw. The rows are
// opaque here: the console encodes them.
//
//	console_rows  8-byte sequence number -> row (position, thread, key, data)
//	console_keys  thread + NUL + key -> 8-byte sequence number of its row in console_rows
//
// A row replaced moves to the next number and keeps its position, the number of its first
// put. Forgetting a thread deletes its rows and leaves a tombstone (the row of key "" with
// no data) under the next number, so that a console that follows learns of it; tombstones
// older than consoleTombstoneAge numbers are dropped.
//
// The buckets are made by the first write, as leaders is: an older loopbot ignores them.
var (
	bucketConsoleRows = []byte("console_rows")
	bucketConsoleKeys = []byte("console_keys")
)

// consoleTombstoneAge is how many numbers behind the latest a tombstone is kept: a console
// that falls that far behind reads the whole view again anyway, when it restarts.
const consoleTombstoneAge = 100000

// PutConsoleRow stores data under thread and key at the view's next number, which it returns.
func (db *DB) PutConsoleRow(ctx context.Context, thread, key string, data []byte) (uint64, error) {
	if data == nil {
		data = []byte{}
	}
	var seq uint64
	err := db.update(ctx, func(t *tx) error {
		var err error
		seq, err = t.putConsoleRow(thread, key, data)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("put console row %s/%s: %w", thread, key, err)
	}
	return seq, nil
}

// DeleteConsoleRows removes rows of thread: those of keys, or every one when keys is empty,
// leaving a tombstone whose number it returns.
func (db *DB) DeleteConsoleRows(ctx context.Context, thread string, keys ...string) (uint64, error) {
	var seq uint64
	err := db.update(ctx, func(t *tx) error {
		seq = 0
		rows, index, err := t.consoleBuckets()
		if err != nil {
			return err
		}
		del := func(k []byte) error {
			if old := index.Get(k); old != nil {
				if err := rows.Delete(old); err != nil {
					return err
				}
			}
			return index.Delete(k)
		}
		if len(keys) > 0 {
			for _, k := range keys {
				if err := del(consoleKey(thread, k)); err != nil {
					return err
				}
			}
			return nil
		}
		prefix := consoleKey(thread, "")
		var all [][]byte
		c := index.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			// The thread's own row is replaced by the tombstone, which keeps its position.
			if !bytes.Equal(k, prefix) {
				all = append(all, bytes.Clone(k))
			}
		}
		for _, k := range all {
			if err := del(k); err != nil {
				return err
			}
		}
		if seq, err = t.putConsoleRow(thread, "", nil); err != nil {
			return err
		}
		return t.purgeConsoleTombstones(seq)
	})
	if err != nil {
		return 0, fmt.Errorf("delete console rows of %s: %w", thread, err)
	}
	return seq, nil
}

// ConsoleRows calls fn for every row written after seq, in the order of their numbers; a
// tombstone's data is nil. fn runs after the read transaction has ended.
func (db *DB) ConsoleRows(ctx context.Context, after uint64, fn func(seq, pos uint64, thread, key string, data []byte) error) error {
	type row struct {
		seq, pos    uint64
		thread, key string
		data        []byte
	}
	var out []row
	err := db.do(ctx, false, func(t *tx) error {
		out = out[:0]
		b := t.btx.Bucket(bucketConsoleRows)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			pos, thread, key, data, err := decodeConsoleRow(v)
			if err != nil {
				// A damaged row loses one message of the console's view, not the view:
				// it is skipped, as the console skips a row whose record does not decode.
				continue
			}
			out = append(out, row{binary.BigEndian.Uint64(k), pos, thread, key, bytes.Clone(data)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read console rows: %w", err)
	}
	for _, r := range out {
		if err := fn(r.seq, r.pos, r.thread, r.key, r.data); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) consoleBuckets() (rows, index *bolt.Bucket, err error) {
	if t.closed {
		return nil, nil, ErrTxClosed
	}
	t.wrote = true
	if rows, err = t.btx.CreateBucketIfNotExists(bucketConsoleRows); err != nil {
		return nil, nil, err
	}
	if index, err = t.btx.CreateBucketIfNotExists(bucketConsoleKeys); err != nil {
		return nil, nil, err
	}
	return rows, index, nil
}

// putConsoleRow writes one row at the next number; nil data is a tombstone.
func (t *tx) putConsoleRow(thread, key string, data []byte) (uint64, error) {
	if thread == "" || bytes.IndexByte([]byte(thread), 0) >= 0 {
		return 0, errors.New("bad thread")
	}
	rows, index, err := t.consoleBuckets()
	if err != nil {
		return 0, err
	}
	seq, err := rows.NextSequence()
	if err != nil {
		return 0, err
	}
	pos := seq
	k := consoleKey(thread, key)
	if old := index.Get(k); old != nil {
		if v := rows.Get(old); v != nil {
			if p, _, _, _, err := decodeConsoleRow(v); err == nil {
				pos = p
			}
		}
		if err := rows.Delete(old); err != nil {
			return 0, err
		}
	}
	if err := rows.Put(seqKey(seq), encodeConsoleRow(pos, thread, key, data)); err != nil {
		return 0, err
	}
	return seq, index.Put(k, seqKey(seq))
}

// purgeConsoleTombstones drops the tombstones more than consoleTombstoneAge behind latest.
func (t *tx) purgeConsoleTombstones(latest uint64) error {
	if latest <= consoleTombstoneAge {
		return nil
	}
	rows, index, err := t.consoleBuckets()
	if err != nil {
		return err
	}
	var gone [][2][]byte
	c := rows.Cursor()
	end := seqKey(latest - consoleTombstoneAge)
	for k, v := c.First(); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		if _, thread, key, data, err := decodeConsoleRow(v); err == nil && data == nil {
			gone = append(gone, [2][]byte{bytes.Clone(k), consoleKey(thread, key)})
		}
	}
	for _, g := range gone {
		if err := rows.Delete(g[0]); err != nil {
			return err
		}
		if err := index.Delete(g[1]); err != nil {
			return err
		}
	}
	return nil
}

func consoleKey(thread, key string) []byte { return []byte(thread + "\x00" + key) }

// encodeConsoleRow is pos, then a flag (1 when the row has data), then the thread and the
// key each after its length, then the data.
func encodeConsoleRow(pos uint64, thread, key string, data []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, pos)
	if data != nil {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(thread)))
	b = append(b, thread...)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, data...)
}

func decodeConsoleRow(v []byte) (pos uint64, thread, key string, data []byte, err error) {
	bad := errors.New("does not decode")
	if len(v) < 9 {
		return 0, "", "", nil, bad
	}
	pos, flag, v := binary.BigEndian.Uint64(v), v[8], v[9:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(v)
		if k <= 0 || uint64(len(v)-k) < n {
			return "", false
		}
		s := string(v[k : k+int(n)])
		v = v[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	thread, ok1 = str()
	key, ok2 = str()
	if !ok1 || !ok2 {
		return 0, "", "", nil, bad
	}
	if flag == 1 {
		data = v
		if data == nil {
			data = []byte{}
		}
	}
	return pos, thread, key, data, nil
}
