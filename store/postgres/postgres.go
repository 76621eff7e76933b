package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loopbot/loopbot/bot"
)

// ErrTxClosed is returned by a Tx used after the function it was handed to returned.
var ErrTxClosed = errors.New("transaction used after its function returned")

// ErrReadOnly is returned by a write inside View.
var ErrReadOnly = errors.New("write in a read-only transaction")

// DefaultMaxAttempts is how many times Update runs its function when the transaction keeps
// losing to others (serialization failures, deadlocks, unique violations) before it gives
// up with the last of those errors.
const DefaultMaxAttempts = 10

// DB is a bot.Store kept in a PostgreSQL database, shared by every replica that opens it.
type DB struct {
	pool *pgxpool.Pool
	// writeErr is the failure of the last write transaction that failed on the database's
	// side (not fn's), cleared by the next one that commits; health checks report it.
	writeErr    atomic.Pointer[error]
	url         string // redacted, for messages
	maxAttempts int
	quarantine  quarantineQueue
}

var _ bot.Store = (*DB)(nil)

type options struct {
	noMigration  bool
	maxAttempts  int
	maxConns     int32
	idleTx       time.Duration
	onQuarantine func(Quarantined)
}

// Option changes how Open opens the database.
type Option func(*options)

// WithMaxAttempts sets how many times Update runs its function before it gives up on
// conflicts with other transactions. It must be at least 1.
func WithMaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// WithoutMigration opens the database only if its schema is already the current one,
// changing nothing: for commands that read (loopbot runs, db check), which must not
// migrate a database under replicas of an older loopbot.
func WithoutMigration() Option { return func(o *options) { o.noMigration = true } }

// WithMaxConns caps the connections the pool opens; 0 leaves pgx's default (the larger of
// 4 and the number of CPUs).
func WithMaxConns(n int32) Option { return func(o *options) { o.maxConns = n } }

// DefaultIdleTransactionTimeout is how long the server lets a transaction of loopbot's sit
// waiting for its next statement before it ends the session (PostgreSQL's
// idle_in_transaction_session_timeout), unless the URL sets that parameter. A transaction's
// function does no network I/O, so a healthy replica waits milliseconds between its
// statements; one that waits longer was paused (SIGSTOP, a frozen VM) or lost its network in
// the middle of a transaction, and the row locks it holds would keep other replicas from
// taking its runs over (their claims skip locked runs) until it came back. Ended, its
// transaction rolls back and frees them; the replica, when it wakes, finds its connection
// gone before its commit and runs the transaction again, fenced as ever.
const DefaultIdleTransactionTimeout = 5 * time.Second

// WithIdleTransactionTimeout sets the server's idle_in_transaction_session_timeout for the
// pool's sessions when the URL does not; d <= 0 leaves the server's own setting.
func WithIdleTransactionTimeout(d time.Duration) Option {
	return func(o *options) { o.idleTx = d }
}

// Open connects to the database at url, runs the migrations it lacks (migrate.go) and
// returns the store. Errors never carry the URL's password.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	o := options{maxAttempts: DefaultMaxAttempts, idleTx: DefaultIdleTransactionTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxAttempts < 1 {
		return nil, fmt.Errorf("open store: max attempts must be at least 1, got %d", o.maxAttempts)
	}
	if url == "" {
		return nil, errors.New("open store: no database URL")
	}
	safe := RedactURL(url)
	secret := urlPassword(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, redactErr(fmt.Errorf("open store %s: %w", safe, err), secret)
	}
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	const idleParam = "idle_in_transaction_session_timeout"
	if _, set := cfg.ConnConfig.RuntimeParams[idleParam]; !set && o.idleTx > 0 {
		cfg.ConnConfig.RuntimeParams[idleParam] = strconv.FormatInt(o.idleTx.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redactErr(fmt.Errorf("open store %s: %w", safe, err), secret)
	}
	prepare := migrate
	if o.noMigration {
		prepare = checkCurrent
	}
	if err := prepare(ctx, pool); err != nil {
		pool.Close()
		return nil, redactErr(fmt.Errorf("open store %s: %w", safe, err), secret)
	}
	return &DB{pool: pool, url: safe, maxAttempts: o.maxAttempts, quarantine: quarantineQueue{hook: o.onQuarantine}}, nil
}

// URL is the database's URL without its password.
func (db *DB) URL() string { return db.url }

// Close closes every connection. Transactions still running are waited for.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping store %s: %w", db.url, err)
	}
	return nil
}

// Update runs fn in one READ COMMITTED transaction in which every row read is locked
// (SELECT ... FOR UPDATE) until the transaction ends, and commits it if fn returns nil. An
// error from fn is returned as it is, after the transaction was rolled back.
//
// When the transaction loses to another (a serialization failure, a deadlock, or a unique
// violation: two transactions that both found a key absent and both inserted it), or loses
// its connection before its commit was sent (a restart or failover of the server), fn runs
// again in a new transaction, up to the store's maximum attempts, waiting a little longer
// each time, for as long as ctx allows. So fn may run more than once, as bot.Store warns.
func (db *DB) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	return db.do(ctx, true, func(t *tx) error { return fn(t) })
}

// View runs fn in a read-only REPEATABLE READ transaction: every read sees the same
// snapshot, as a bbolt View does, and a read-only one never fails to serialise. One that
// loses its connection, even at its COMMIT, runs again as Update's do before theirs.
func (db *DB) View(ctx context.Context, fn func(tx bot.Tx) error) error {
	return db.do(ctx, false, func(t *tx) error { return fn(t) })
}

// do runs fn in a transaction, again while it loses to others.
func (db *DB) do(ctx context.Context, writable bool, fn func(t *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := db.attempt(ctx, writable, fn)
		db.quarantine.flush(ctx, db.pool)
		if writable && err == nil {
			db.writeErr.Store(nil)
		}
		if err == nil || !retryable(err) || attempt >= db.maxAttempts {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// backoff waits before attempt+1: a random time up to 2^attempt milliseconds, capped at
// 250ms, so the transactions that collided do not collide again in step.
func backoff(ctx context.Context, attempt int) error {
	limit := time.Duration(1<<min(attempt, 8)) * time.Millisecond
	d := min(limit, 250*time.Millisecond)
	d = time.Duration(rand.Int64N(int64(d)) + 1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// retryable reports whether running the transaction again can succeed where err failed
// it, with nothing of the failed attempt committed: a conflict with another transaction, or
// a connection lost before the commit (errUncommitted).
func retryable(err error) bool {
	if errors.Is(err, errUncommitted) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"23505": // unique_violation
		return true
	}
	return false
}

// codeIdleTimeout is the error of a session the server ended for sitting idle in a
// transaction (DefaultIdleTransactionTimeout): the transaction was rolled back.
const codeIdleTimeout = "25P03"

// errUncommitted marks a failure of the connection that left the transaction uncommitted
// for certain: at its start, in one of its statements (the server rolls back a
// transaction whose session ends), or at a commit that was never sent. A commit sent and
// not answered may have committed, and is not run again.
var errUncommitted = errors.New("connection lost before the commit")

// lostConnection reports whether err is the end of the connection or of the server (a
// restart, a failover), rather than an error of the statement.
func lostConnection(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection_exception; 57P01-57P03 are the server's shutdown and
		// start-up.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" ||
			pgErr.Code == codeIdleTimeout
	}
	var netErr net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// uncommitted marks err as errUncommitted when it is a lost connection and ctx is still
// live (a cancelled context breaks the connection too, and must end the retries).
func uncommitted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && lostConnection(err) {
		return fmt.Errorf("%w: %w", errUncommitted, err)
	}
	return err
}

// attempt runs fn once in a transaction of its own, on a connection of its own. BEGIN is
// sent with fn's first statement (pipeline.go).
func (db *DB) attempt(ctx context.Context, writable bool, fn func(t *tx) error) (err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.storeErr("begin", uncommitted(ctx, err))
	}
	t := &tx{ctx: ctx, conn: conn, writable: writable, db: db}
	if writable {
		t.queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	} else {
		t.queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	}
	done := false
	defer func() {
		t.closed = true
		if !done {
			// fn panicked: roll back and let the panic go on.
			t.rollback()
		}
		conn.Release()
	}()
	fnErr := fn(t)
	var commitErr error
	if fnErr == nil && t.failed == nil {
		commitErr = t.commit()
	}
	done = true
	if fnErr != nil || t.failed != nil {
		t.rollback()
		if t.failed != nil {
			t.failed = uncommitted(ctx, t.failed)
		}
		if t.failed != nil && retryable(t.failed) {
			// A statement lost to another transaction, or the connection; whatever fn
			// made of that, the transaction is aborted and runs again.
			return t.failed
		}
		if fnErr != nil {
			return fnErr
		}
		return t.failed
	}
	if commitErr != nil {
		t.rollback()
		var pgErr *pgconn.PgError
		if pgconn.SafeToRetry(commitErr) || !writable || errors.As(commitErr, &pgErr) && pgErr.Code == codeIdleTimeout {
			// The commit was never sent, there was nothing to commit (a View that lost its
			// connection at its COMMIT, a server restart), or it came after the server had
			// ended the session and rolled the transaction back.
			commitErr = uncommitted(ctx, commitErr)
		}
		err = db.storeErr("commit", commitErr)
		if writable && !retryable(err) && ctx.Err() == nil {
			db.writeErr.Store(&err)
		}
		return err
	}
	return nil
}

// WriteError returns why the last write failed on the database's side if no write has
// committed since, else nil.
func (db *DB) WriteError() error {
	if p := db.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// storeErr wraps an error of the database's own (not fn's). Context errors stay
// recognisable, as do conflicts, which do retries.
func (db *DB) storeErr(what string, err error) error {
	return fmt.Errorf("store %s: %w", what, err)
}

// WALBytes is the server's write-ahead log insert position in bytes: what every database of the
// server has written to its log so far. Its growth over a checkpoint is what the checkpoint
// cost the log (benchmarks report it).
func (db *DB) WALBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := db.pool.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	return n, nil
}
