package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/loopbot/loopbot/bot"
)

// SchemaVersion is the version of the on-disk layout this package reads and writes. A file
// with a newer version is refused rather than misread; an older one is migrated by Open.
//
// Version 2 added run_heads and runs_by_status; version 3 run_items, where a run's messages
// and calls are kept one record each instead of inside the run's record.
const SchemaVersion = 3

// ErrLocked is returned by Open when another process holds the database file.
var ErrLocked = errors.New("database is locked by another loopbot process")

// ErrSchema is returned by Open when the file's schema version is not one this package
// can read.
var ErrSchema = errors.New("unsupported database schema")

// ErrTxClosed is returned by a Tx used after the function it was handed to returned.
var ErrTxClosed = errors.New("transaction used after its function returned")

// DefaultLockTimeout is how long Open waits for another process to release the file.
const DefaultLockTimeout = time.Second

// Bucket names. The index buckets hold keys only and are kept in step with their data
// buckets inside the same transaction.
var (
	bucketConversations = []byte("conversations")
	bucketRuns          = []byte("runs")
	bucketRunIDs        = []byte("run_ids")        // run ID -> key in runs
	bucketRunHeads      = []byte("run_heads")      // key in runs -> the run without its state
	bucketRunsByStatus  = []byte("runs_by_status") // status + NUL + key in runs -> run ID
	bucketRunItems      = []byte("run_items")      // key in runs + kind + index -> a message or call of its state
	bucketApprovals     = []byte("approvals")
	bucketActions       = []byte("actions")
	bucketEvents        = []byte("events")
	bucketEventExpiry   = []byte("event_expiry") // expiry time + event ID -> nothing
	bucketAudit         = []byte("audit")
	bucketOutbox        = []byte("outbox")
	bucketFeedback      = []byte("feedback") // run ID + NUL + user ID -> bot.Feedback
	bucketMeta          = []byte("meta")
	bucketQuarantine    = []byte("quarantine") // bucket + NUL + key + NUL + hash -> Quarantined
	bucketMemory        = []byte("memory")     // channel + NUL + fact ID -> bot.MemoryFact
	bucketAutonomy      = []byte("channel_autonomy")
	bucketInbox         = []byte("inbox") // event ID -> bot.InboxEntry

	allBuckets = [][]byte{
		bucketConversations, bucketRuns, bucketRunIDs, bucketRunHeads, bucketRunsByStatus, bucketRunItems, bucketApprovals, bucketActions,
		bucketEvents, bucketEventExpiry, bucketAudit, bucketOutbox, bucketFeedback, bucketMeta, bucketQuarantine, bucketAutonomy, bucketMemory, bucketGrants, bucketInbox,
	}

	metaSchemaVersion = []byte("schema_version")
)

// DB is a bot.Store kept in one bbolt file.
type DB struct {
	bolt *bolt.DB
	path string
	// writeErr is the failure of the last write transaction that failed on the store's
	// side (not fn's), cleared by the next one that commits; health checks report it.
	writeErr atomic.Pointer[error]
	// commits counts write transactions committed, for BytesWritten and WriteStats;
	// writes, waited and busy are the rest of WriteStats (group.go).
	commits, writes atomic.Int64
	waited, busy    atomic.Int64 // nanoseconds

	// The group commit's queue (group.go): writes waiting for their transaction, and
	// whether a leader is committing.
	wmu     sync.Mutex
	queue   []*write
	firsts  []*write // writes of updateFirst, which go ahead of queue
	writing bool

	// Records found not to decode, to be moved to the quarantine bucket once the
	// transaction that found them has ended (quarantine.go), and who is told when one is.
	qmu          sync.Mutex
	undecodable  []Quarantined
	onQuarantine func(Quarantined)

	// boundary counts the commits that changed what working runs read at their step
	// boundaries (boundary.go).
	boundary atomic.Uint64

	// notes are the bots' notifications to one another (notify.go).
	notes notices

	// outbox holds the outbox items as last decoded (outboxcache.go).
	outbox outboxCache

	// heads holds the run heads as PutRun last wrote them (headcache.go).
	heads headCache

	// intake is the journal of accepted events (intake.go); nil when opened without it.
	intake *intake
}

// WriteError returns why the last write failed if no write has committed since, else nil:
// a database that opens and reads fine may still refuse writes, on a full disk say.
func (db *DB) WriteError() error {
	if p := db.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

var _ bot.Store = (*DB)(nil)

type options struct {
	lockTimeout  time.Duration
	onQuarantine func(Quarantined)
	intake       bool
}

// Option changes how Open opens the database.
type Option func(*options)

// WithLockTimeout sets how long Open waits for another process to release the file before
// it gives up with ErrLocked. It must be positive: waiting forever is what the timeout
// exists to prevent.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithIntake opens the database with its intake journal (intake.go), where bot.Bot.Accept
// makes the events durable in one fdatasync: what an earlier process left in the journal
// is moved into the inbox, and a missing journal is made in the background. It is for the
// process that serves the database; one opened without it leaves the journal as it is.
func WithIntake() Option {
	return func(o *options) { o.intake = true }
}

// Open opens the database at path, creating the file (mode 0600) and its parent directory
// (mode 0700) if needed. If another process holds the file for longer than the lock
// timeout, Open fails with an error wrapping ErrLocked.
func Open(path string, opts ...Option) (*DB, error) {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.lockTimeout <= 0 {
		return nil, fmt.Errorf("open store: lock timeout must be positive, got %s", o.lockTimeout)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// `loopbot db compact` replaces the file while it holds its lock: a process that
	// opened the old file and waited for the lock would run on the backup. So a file
	// replaced meanwhile is opened again.
	for tries := 1; ; tries++ {
		bdb, replaced, err := openFile(path, o)
		if err != nil {
			return nil, err
		}
		if !replaced {
			db := &DB{bolt: bdb, path: path, onQuarantine: o.onQuarantine}
			if !o.intake {
				return db, nil
			}
			if db.intake, err = openIntake(db); err != nil {
				_ = bdb.Close()
				return nil, fmt.Errorf("open store %s: %w", path, err)
			}
			return db, nil
		}
		_ = bdb.Close()
		if tries == 3 {
			return nil, fmt.Errorf("open store %s: the file was replaced while loopbot waited for its lock, %d times", path, tries)
		}
	}
}

// initialMmapSize is the mapping bbolt starts with, and so the size the file first grows
// to (bbolt grows a file under 16 MB to its mapping): a new store's first commits would
// otherwise each grow the file (a truncate and a sync of its own) and map it again, which
// waits for every reader, while an intake commit waits behind them. The file is sparse,
// so the space not written takes no room on disk.
const initialMmapSize = 16 << 20

// openFile checks and opens the file at path, and reports whether the path names another
// file by the time its lock was granted, before writing anything to it.
func openFile(path string, o options) (_ *bolt.DB, replaced bool, _ error) {
	// A damaged file is refused here, before anything reads it where a fault would end
	// the process (damage.go).
	if err := verifyFile(path, o.lockTimeout); err != nil {
		return nil, false, err
	}
	var bdb *bolt.DB
	var file *os.File
	err := guard(func() error {
		var err error
		bdb, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.lockTimeout, InitialMmapSize: initialMmapSize,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				file = f
				return f, err
			}})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, false, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("open store %s: %w", path, err)
	}
	opened, err := file.Stat()
	if err == nil {
		var now os.FileInfo
		if now, err = os.Stat(path); err == nil && !os.SameFile(opened, now) {
			return bdb, true, nil
		}
	}
	if err != nil {
		_ = bdb.Close()
		return nil, false, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := guard(func() error { return bdb.Update(openSchema) }); err != nil {
		_ = bdb.Close()
		return nil, false, fmt.Errorf("open store %s: %w", path, err)
	}
	return bdb, false, nil
}

// initSchema checks the schema version before it creates anything, so that a newer file is
// left exactly as it was found, and migrates an older file in the same transaction, so that
// a failed migration leaves it as it was too.
func initSchema(btx *bolt.Tx) error {
	version := 0 // a new file
	if meta := btx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(metaSchemaVersion); v != nil {
			if err := json.Unmarshal(v, &version); err != nil {
				return fmt.Errorf("%w: version %q is not a number", ErrSchema, v)
			}
			if version > SchemaVersion {
				return fmt.Errorf("%w: version %d is newer than this loopbot supports (%d)", ErrSchema, version, SchemaVersion)
			}
			if version < 1 {
				return fmt.Errorf("%w: version %d is not valid", ErrSchema, version)
			}
		}
	}
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if version == 1 {
		if err := indexRuns(btx); err != nil {
			return fmt.Errorf("migrate schema 1 to 2: %w", err)
		}
	}
	if version == 1 || version == 2 {
		if err := splitRuns(btx); err != nil {
			return fmt.Errorf("migrate schema 2 to 3: %w", err)
		}
	}
	if version == SchemaVersion {
		return nil
	}
	v, err := json.Marshal(SchemaVersion)
	if err != nil {
		return err
	}
	return btx.Bucket(bucketMeta).Put(metaSchemaVersion, v)
}

// indexRuns fills run_heads and runs_by_status from runs, for a file written before they
// existed.
func indexRuns(btx *bolt.Tx) error {
	heads, byStatus := btx.Bucket(bucketRunHeads), btx.Bucket(bucketRunsByStatus)
	return btx.Bucket(bucketRuns).ForEach(func(key, data []byte) error {
		r, err := decode[bot.RunRecord](data, fmt.Sprintf("run %x", key))
		if err != nil {
			return err
		}
		if bytes.IndexByte([]byte(r.Status), 0) >= 0 {
			return fmt.Errorf("run %s: status %q contains a NUL byte", r.ID, r.Status)
		}
		h := head(r)
		headData, err := json.Marshal(&h)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		if err := heads.Put(key, headData); err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		if err := byStatus.Put(statusKey(r.Status, key), []byte(r.ID)); err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		return nil
	})
}

// Path is the file the database lives in.
func (db *DB) Path() string { return db.path }

// BytesWritten is how many bytes of pages the store's write transactions have written to
// the file since it was opened: the pages they changed, and the meta page each commit
// writes. It is what checkpoints cost the disk.
func (db *DB) BytesWritten() int64 {
	st := db.bolt.Stats()
	return st.TxStats.GetPageAlloc() + db.commits.Load()*int64(db.bolt.Info().PageSize)
}

// Close moves the intake journal's entries into the inbox, closes the file and releases its
// lock. Transactions still running are waited for.
func (db *DB) Close() error {
	var jerr error
	if db.intake != nil {
		jerr = db.intake.close(db)
	}
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	if jerr != nil {
		// The entries stay in the journal, which the next Open moves.
		return fmt.Errorf("close store: %w", jerr)
	}
	return nil
}

// Update runs fn in one read-write transaction and commits it if fn returns nil. An error
// from fn is returned as it is, after fn's writes were rolled back.
//
// Writes that arrive while another commits are committed together, in one transaction with
// one disk sync (see group.go), so fn may run more than once: whatever it sets outside the
// transaction must be set afresh on every call.
func (db *DB) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	// Whatever fn found undecodable is moved aside once its transaction has ended.
	defer db.quarantine()
	return db.update(ctx, func(t *tx) error { return fn(t) })
}

// UpdateFirst is Update for a write a caller waits on at once, as a platform waits for the
// acknowledgement of the events bot.Bot.Accept stores: it goes into the next transaction
// ahead of the writes already waiting (group.go).
func (db *DB) UpdateFirst(ctx context.Context, fn func(tx bot.Tx) error) error {
	defer db.quarantine()
	return db.updateFirst(ctx, func(t *tx) error { return fn(t) })
}

// View runs fn in one read-only transaction, which sees a consistent snapshot.
func (db *DB) View(ctx context.Context, fn func(tx bot.Tx) error) error {
	return db.do(ctx, false, func(t *tx) error { return fn(t) })
}

// do runs fn in a transaction of its own.
func (db *DB) do(ctx context.Context, writable bool, fn func(t *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var fnErr error
	run := func(btx *bolt.Tx) error {
		// Checked again here because Update may have waited for another writer.
		if err := ctx.Err(); err != nil {
			fnErr = err
			return err
		}
		t := &tx{btx: btx, db: db}
		defer func() { t.closed = true }()
		fnErr = fn(t)
		return fnErr
	}
	var err error
	if writable {
		err = db.bolt.Update(run)
	} else {
		err = db.bolt.View(run)
	}
	db.quarantine()
	if err != nil && fnErr == nil {
		// The error is bbolt's own (a failed commit, a closed database), not fn's.
		if writable {
			return db.storeError(err)
		}
		return fmt.Errorf("store view: %w", err)
	}
	if writable && err == nil {
		db.writeErr.Store(nil)
		db.commits.Add(1)
	}
	return err
}
