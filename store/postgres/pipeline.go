package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Round trips. Every statement a transaction waits for costs a round trip to the server, and
// a checkpoint used to wait for nine: BEGIN, the lease's fence, the run's row, its items'
// hashes, two item upserts, the run's upsert, the outbox item and COMMIT. A transaction
// therefore sends what nobody waits for together with the next statement whose answer it
// needs: BEGIN goes with the first statement, and a write whose result nobody reads (every
// put and delete but those that report what they did) goes with the next read, or with
// COMMIT. A checkpoint now waits for four round trips, and a View of one read for two.
//
// Locks are taken in the same order as before, since the server runs a batch's statements
// in order: a read FOR UPDATE still locks its rows before anything written after it, and a
// write queued before a read still runs before it. A write that fails (a unique violation of
// an insert of a key read as absent, a lost conflict) fails the batch it went with; its
// transaction is aborted, as it was when the write waited, and runs again.

// stmt is a statement queued for the next round trip.
type stmt struct {
	sql  string
	args []any
}

// queue holds sql for the next round trip.
func (t *tx) queue(sql string, args ...any) {
	t.queued = append(t.queued, stmt{sql, args})
}

// write queues a write whose result nobody reads; its error, if any, comes with the next
// round trip and aborts the transaction.
func (t *tx) write(sql string, args ...any) error {
	if t.failed != nil {
		return t.failed
	}
	t.queue(sql, args...)
	return nil
}

// send sends the queued statements and then last in one batch, reads the queued ones'
// results, and returns the batch with last's results next. On an error the batch is closed.
func (t *tx) send(last ...stmt) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	for _, q := range t.queued {
		b.Queue(q.sql, q.args...)
	}
	for _, q := range last {
		b.Queue(q.sql, q.args...)
	}
	n := len(t.queued)
	t.queued = t.queued[:0]
	t.begun = true
	br := t.conn.SendBatch(t.ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, t.note(err)
		}
	}
	return br, nil
}

// exec runs sql, with the queued statements before it, and returns the rows it affected.
func (t *tx) exec(sql string, args ...any) (int64, error) {
	if len(t.queued) == 0 {
		tag, err := t.conn.Exec(t.ctx, sql, args...)
		if t.note(err) != nil {
			return 0, err
		}
		return tag.RowsAffected(), nil
	}
	br, err := t.send(stmt{sql, args})
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	err = errors.Join(err, br.Close())
	if t.note(err) != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// query runs sql, with the queued statements before it. The caller closes the rows.
func (t *tx) query(sql string, args ...any) (pgx.Rows, error) {
	if len(t.queued) == 0 {
		return t.conn.Query(t.ctx, sql, args...)
	}
	br, err := t.send(stmt{sql, args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// queryRow runs sql, with the queued statements before it.
func (t *tx) queryRow(sql string, args ...any) pgx.Row {
	if len(t.queued) == 0 {
		return t.conn.QueryRow(t.ctx, sql, args...)
	}
	br, err := t.send(stmt{sql, args})
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// commit sends what is queued and COMMIT. A write's error means nothing was committed and
// is the transaction's failure (t.failed); an error of COMMIT itself, or of a connection
// lost after the batch was sent, is returned, as it may or may not have committed.
func (t *tx) commit() error {
	if !t.begun && len(t.queued) <= 1 {
		return nil // fn read and wrote nothing: BEGIN was not even sent
	}
	if len(t.queued) == 0 {
		tag, err := t.conn.Exec(t.ctx, "COMMIT")
		return commitTag(tag, err)
	}
	b := &pgx.Batch{}
	for _, q := range t.queued {
		b.Queue(q.sql, q.args...)
	}
	b.Queue("COMMIT")
	n := len(t.queued)
	t.queued = t.queued[:0]
	br := t.conn.SendBatch(t.ctx, b)
	defer br.Close()
	for range n {
		if _, err := br.Exec(); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
				// The server refused the write (or nothing was sent): not committed.
				t.note(err)
				return nil
			}
			return err
		}
	}
	tag, err := br.Exec()
	return commitTag(tag, err)
}

// commitTag checks COMMIT's answer: a transaction the server had aborted answers ROLLBACK.
func commitTag(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() != "COMMIT" {
		return errRolledBack
	}
	return err
}

var errRolledBack = errors.New("the server rolled the transaction back")

// rollback ends a transaction that fn failed or that failed, if BEGIN was sent. A
// connection left in a transaction is not reused: the pool closes it on release.
func (t *tx) rollback() {
	t.queued = t.queued[:0]
	if t.begun {
		_, _ = t.conn.Exec(context.Background(), "ROLLBACK")
	}
}

// batchRows closes its batch with its rows.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // the batch's, on closing
}

// Next closes the batch after the last row, as pgx closes rows then: a caller that reads
// every row may never call Close.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if err := r.br.Close(); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow closes its batch once scanned.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRow is a row whose statement could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
