package postgres

import (
	"context"
	"errors"
	"fmt"
)

// The web console's view (adapters/web, viewstore.go) is the console_rows table
// (migrations/0003_console_view.sql): rows the console writes under a thread and a key, as
// opaque bytes, numbered in the order they committed, so that the console of every replica
// reads what changed since the last number it saw. A writer takes its number from
// console_seq's one row, which it holds locked until it commits: a number never becomes
// visible before a smaller one, as a sequence's would (nextval is not transactional).

// consoleTombstoneAge is how many numbers behind the latest a tombstone is kept, as in the
// bbolt store.
const consoleTombstoneAge = 100000

// PutConsoleRow stores data under thread and key at the view's next number, which it returns.
func (db *DB) PutConsoleRow(ctx context.Context, thread, key string, data []byte) (uint64, error) {
	if data == nil {
		data = []byte{}
	}
	var seq uint64
	err := db.do(ctx, true, func(t *tx) error {
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
	err := db.do(ctx, true, func(t *tx) error {
		seq = 0
		if len(keys) > 0 {
			_, err := t.exec("DELETE FROM console_rows WHERE thread = $1 AND key = ANY($2)", thread, keys)
			return err
		}
		if _, err := t.exec("DELETE FROM console_rows WHERE thread = $1 AND key <> ''", thread); err != nil {
			return err
		}
		var err error
		if seq, err = t.putConsoleRow(thread, "", nil); err != nil {
			return err
		}
		if seq > consoleTombstoneAge {
			_, err = t.exec("DELETE FROM console_rows WHERE data IS NULL AND seq < $1", int64(seq-consoleTombstoneAge))
		}
		return err
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
		seq, pos    int64
		thread, key string
		data        []byte
	}
	var out []row
	err := db.do(ctx, false, func(t *tx) error {
		out = out[:0]
		rows, err := t.query("SELECT seq, pos, thread, key, data FROM console_rows WHERE seq > $1 ORDER BY seq", int64(after))
		if t.note(err) != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.pos, &r.thread, &r.key, &r.data); err != nil {
				return t.note(err)
			}
			out = append(out, r)
		}
		return t.note(rows.Err())
	})
	if err != nil {
		return fmt.Errorf("read console rows: %w", err)
	}
	for _, r := range out {
		if err := fn(uint64(r.seq), uint64(r.pos), r.thread, r.key, r.data); err != nil {
			return err
		}
	}
	return nil
}

// putConsoleRow writes one row at the next number; nil data is a tombstone. A replaced row
// keeps its position.
func (t *tx) putConsoleRow(thread, key string, data []byte) (uint64, error) {
	if thread == "" {
		return 0, errors.New("bad thread")
	}
	if err := t.check(true); err != nil {
		return 0, err
	}
	var seq int64
	if err := t.note(t.queryRow("UPDATE console_seq SET seq = seq + 1 RETURNING seq").Scan(&seq)); err != nil {
		return 0, err
	}
	// Nobody reads the insert's result: it goes with the commit (pipeline.go).
	err := t.write(`INSERT INTO console_rows (thread, key, seq, pos, data) VALUES ($1, $2, $3, $3, $4)
		ON CONFLICT (thread, key) DO UPDATE SET seq = EXCLUDED.seq, data = EXCLUDED.data`, thread, key, seq, data)
	return uint64(seq), err
}
