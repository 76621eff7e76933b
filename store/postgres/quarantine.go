package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Quarantine.
//
// Every value is JSON written by loopbot, so a record that does not decode comes from a
// bug, a newer loopbot's change, or a hand edit; PostgreSQL's own checksums and WAL keep
// the bytes whole. As in the bbolt store, such a record must not stop those around it (the
// dispatcher lists the whole outbox on every pass): a getter treats it as absent, a list
// skips it, and once the transaction has ended it is moved, in a transaction of its own, to
// the quarantine table, and the hook of WithQuarantineHook is told. This covers the same
// records as bbolt's: conversations, actions, approvals, audit entries and outbox items.
// Runs are not quarantined: one that does not decode fails the reads that name it.

// Quarantined is a record moved aside because it did not decode.
type Quarantined struct {
	Bucket string    // the table, or the records table's bucket
	Key    string    // its key (an audit entry's sequence number)
	Value  []byte    `json:"-"`
	Reason string    // why it did not decode
	At     time.Time // when it was moved
}

// WithQuarantineHook sets a function told of every record the store quarantines, after the
// move has committed. It must not call the store.
func WithQuarantineHook(fn func(Quarantined)) Option {
	return func(o *options) { o.onQuarantine = fn }
}

// quarantineQueue holds the records found not to decode until they are moved.
type quarantineQueue struct {
	mu   sync.Mutex
	recs []Quarantined
	hook func(Quarantined)
}

func (q *quarantineQueue) add(r Quarantined) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recs = append(q.recs, r)
}

// flush moves the queued records aside. A record changed since it was read (so that it may
// decode now) is left where it is.
func (q *quarantineQueue) flush(ctx context.Context, pool *pgxpool.Pool) {
	q.mu.Lock()
	recs := q.recs
	q.recs = nil
	hook := q.hook
	q.mu.Unlock()
	// The move is the store's own housekeeping: the caller's context ending does not
	// stop it.
	ctx = context.WithoutCancel(ctx)
	for _, r := range recs {
		r.At = time.Now().UTC()
		moved := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var del string
			var args []any
			switch r.Bucket {
			case "approvals":
				del, args = "DELETE FROM approvals WHERE id = $1 AND data = $2", []any{r.Key, r.Value}
			case "outbox":
				del, args = "DELETE FROM outbox WHERE key = $1 AND data = $2", []any{r.Key, r.Value}
			case "audit":
				del, args = "DELETE FROM audit WHERE seq = $1::bigint AND data = $2", []any{r.Key, r.Value}
			default:
				del, args = "DELETE FROM records WHERE bucket = $1 AND key = $2 AND data = $3", []any{r.Bucket, r.Key, r.Value}
			}
			tag, err := tx.Exec(ctx, del, args...)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			moved = true
			_, err = tx.Exec(ctx, "INSERT INTO quarantine (bucket, key, data, reason, at) VALUES ($1, $2, $3, $4, $5)",
				r.Bucket, r.Key, r.Value, r.Reason, r.At)
			return err
		})
		if err != nil {
			// It stays where it is and is met, and queued, again.
			continue
		}
		if moved && hook != nil {
			hook(r)
		}
	}
}

// QuarantineCount is how many records the quarantine table holds.
func (db *DB) QuarantineCount(ctx context.Context) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM quarantine").Scan(&n); err != nil {
		return 0, fmt.Errorf("count quarantined records: %w", err)
	}
	return n, nil
}
