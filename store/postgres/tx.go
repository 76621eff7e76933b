package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loopbot/loopbot/bot"
)

// tx is one transaction behind the bot.Tx interface.
type tx struct {
	ctx      context.Context
	conn     *pgxpool.Conn
	writable bool
	// queued are the statements sent with the next one the transaction waits for
	// (pipeline.go), BEGIN first; begun says BEGIN was sent.
	queued []stmt
	begun  bool
	closed bool
	db     *DB
	// failed is the first error of a statement: PostgreSQL aborts the transaction at its
	// first error, so every later statement fails with it too, and a conflict among them
	// makes do run the transaction again whatever fn made of it.
	failed error
	// absent holds the keys this transaction read and found missing: a put of one of them
	// inserts, and fails with a unique violation if another transaction inserted it
	// meanwhile, where an upsert would silently overwrite what the other wrote.
	absent map[string]bool
}

var _ bot.Tx = (*tx)(nil)

// Buckets of the records table.
const (
	bucketConversations = "conversations"
	bucketActions       = "actions"
)

// check fails a call on a closed transaction, after a failed statement, or (for a write)
// in a View.
func (t *tx) check(write bool) error {
	switch {
	case t.closed:
		return ErrTxClosed
	case t.failed != nil:
		return fmt.Errorf("transaction aborted by an earlier error: %w", t.failed)
	case write && !t.writable:
		return ErrReadOnly
	}
	return nil
}

// note keeps the first failure of a statement.
func (t *tx) note(err error) error {
	if err != nil && t.failed == nil && !errors.Is(err, pgx.ErrNoRows) {
		t.failed = err
	}
	return err
}

// forUpdate is the locking clause of a read in a writable transaction: every row a
// transaction reads stays locked until it ends, so a read, check and write is a
// compare-and-set under READ COMMITTED.
func (t *tx) forUpdate() string {
	if t.writable {
		return " FOR UPDATE"
	}
	return ""
}

func (t *tx) markAbsent(table, key string) {
	if !t.writable {
		return
	}
	if t.absent == nil {
		t.absent = map[string]bool{}
	}
	t.absent[table+"\x00"+key] = true
}

// wasAbsent reports whether the transaction read key in table and found it missing, and
// forgets it: once inserted, a second put updates.
func (t *tx) wasAbsent(table, key string) bool {
	k := table + "\x00" + key
	if t.absent[k] {
		delete(t.absent, k)
		return true
	}
	return false
}

// getBytes reads one value, or returns pgx.ErrNoRows.
func (t *tx) getBytes(sql string, args ...any) ([]byte, error) {
	var data []byte
	err := t.queryRow(sql, args...).Scan(&data)
	return data, t.note(err)
}

func decode[T any](data []byte, what string) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return v, nil
}

// getRecord reads a record of the records table.
func getRecord[T any](t *tx, bucket, key, what string) (*T, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("get %s %s: %w", what, key, err)
	}
	data, err := t.getBytes("SELECT data FROM records WHERE bucket = $1 AND key = $2"+t.forUpdate(), bucket, key)
	if errors.Is(err, pgx.ErrNoRows) {
		t.markAbsent(bucket, key)
		return nil, fmt.Errorf("%s %s: %w", what, key, bot.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", what, key, err)
	}
	v, err := decode[T](data, what+" "+key)
	if err != nil {
		t.db.quarantine.add(Quarantined{Bucket: bucket, Key: key, Value: data, Reason: err.Error()})
		return nil, fmt.Errorf("%w (quarantined): %w", err, bot.ErrNotFound)
	}
	return v, nil
}

// putRecord stores v as JSON under key in the records table.
func putRecord(t *tx, bucket, key, what string, v any) error {
	if key == "" {
		return fmt.Errorf("put %s: empty key", what)
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	sql := "INSERT INTO records (bucket, key, data) VALUES ($1, $2, $3)"
	if !t.wasAbsent(bucket, key) {
		sql += " ON CONFLICT (bucket, key) DO UPDATE SET data = EXCLUDED.data"
	}
	if err := t.write(sql, bucket, key, data); err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	return nil
}

func (t *tx) Conversation(thread bot.ThreadRef) (*bot.Conversation, error) {
	return getRecord[bot.Conversation](t, bucketConversations, thread.Key(), "conversation")
}

func (t *tx) PutConversation(c *bot.Conversation) error {
	if c == nil || !c.Thread.Valid() {
		return errors.New("put conversation: no valid thread")
	}
	return putRecord(t, bucketConversations, c.Thread.Key(), "conversation", c)
}

func (t *tx) Action(id string) (*bot.Action, error) {
	return getRecord[bot.Action](t, bucketActions, id, "action")
}

func (t *tx) PutAction(a *bot.Action) error {
	if a == nil {
		return errors.New("put action: nil")
	}
	return putRecord(t, bucketActions, a.ID, "action", a)
}

// threadKey is the runs.thread value of a thread: its JSON, which, unlike ThreadRef.Key,
// no two threads share.
func threadKey(th bot.ThreadRef) (string, error) {
	b, err := json.Marshal(th)
	return string(b), err
}

func (t *tx) Run(id string) (*bot.RunRecord, error) {
	return t.fullRun(id, true)
}

// fullRun reads run id with its state's items: its calls, and its messages when
// withMessages is set. The row and the items are asked for in one round trip.
func (t *tx) fullRun(id string, withMessages bool) (*bot.RunRecord, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	br, err := t.send(stmt{"SELECT data FROM runs WHERE id = $1" + t.forUpdate(), []any{id}}, stmt{itemsQuery(withMessages), []any{[]string{id}}})
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	defer br.Close()
	var data []byte
	err = br.QueryRow().Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		t.markAbsent("runs", id)
		return nil, fmt.Errorf("run %s: %w", id, bot.ErrNotFound)
	}
	if t.note(err) != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	r, err := decode[bot.RunRecord](data, "run "+id)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if t.note(err) != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	if err := t.readItems(map[string]*bot.RunRecord{id: r}, rows); err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// RunHeader reads the run's head column, a few hundred bytes, where Run reads the agent
// state too.
func (t *tx) RunHeader(id string) (*bot.RunRecord, error) {
	return t.run(id, "head", "run head")
}

func (t *tx) run(id, column, what string) (*bot.RunRecord, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("get %s %s: %w", what, id, err)
	}
	data, err := t.getBytes("SELECT "+column+" FROM runs WHERE id = $1"+t.forUpdate(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		t.markAbsent("runs", id)
		return nil, fmt.Errorf("run %s: %w", id, bot.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", what, id, err)
	}
	return decode[bot.RunRecord](data, what+" "+id)
}

// PutRun stores r. When r carries a State, the stored Status is the State's, so the two
// can never disagree; r itself is not changed. A run keeps the place in the creation order
// it took when first put.
func (t *tx) PutRun(r *bot.RunRecord) error {
	if r == nil || r.ID == "" {
		return errors.New("put run: no run id")
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("put run %s: %w", r.ID, err)
	}
	rec := *r
	if rec.State != nil {
		if rec.State.RunID != rec.ID {
			return fmt.Errorf("put run %s: state belongs to run %q", rec.ID, rec.State.RunID)
		}
		rec.Status = rec.State.Status
	}
	// The state's messages and calls are stored as run items (items.go), each written
	// only when it is new or changed.
	full := rec.State
	if full != nil {
		rec.State = splitState(full)
	}
	if err := t.putRunRow(&rec); err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	if err := t.putItems(rec.ID, full); err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	return nil
}

// putRunRow writes the run's row: rec's state, if any, is already without its items.
func (t *tx) putRunRow(rec *bot.RunRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	h := *rec
	h.State = nil
	headData, err := json.Marshal(&h)
	if err != nil {
		return err
	}
	thread, err := threadKey(rec.Thread)
	if err != nil {
		return err
	}
	sql := "INSERT INTO runs (id, status, thread, head, data) VALUES ($1, $2, $3, $4, $5)"
	if !t.wasAbsent("runs", rec.ID) {
		sql += " ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, thread = EXCLUDED.thread, head = EXCLUDED.head, data = EXCLUDED.data"
	}
	return t.write(sql, rec.ID, string(rec.Status), thread, headData, data)
}

// runQuery builds the query of the runs f selects, in creation order.
func (t *tx) runQuery(columns string, f bot.RunFilter) (string, []any, error) {
	if f.Limit < 0 {
		return "", nil, fmt.Errorf("negative limit %d", f.Limit)
	}
	var where []string
	var args []any
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			statuses[i] = string(s)
		}
		args = append(args, statuses)
		where = append(where, fmt.Sprintf("status = ANY($%d)", len(args)))
	}
	if f.Thread != nil {
		th, err := threadKey(*f.Thread)
		if err != nil {
			return "", nil, err
		}
		args = append(args, th)
		where = append(where, fmt.Sprintf("thread = $%d", len(args)))
	}
	sql := "SELECT " + columns + " FROM runs"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY seq"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		sql += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	return sql + t.forUpdate(), args, nil
}

// Runs lists runs in creation order, the order in which they were first put. Filtered by
// status, it reads only the runs of those statuses, through the runs_status index.
func (t *tx) Runs(f bot.RunFilter) ([]*bot.RunRecord, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	sql, args, err := t.runQuery("id, data", f)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	rows, err := t.query(sql, args...)
	if t.note(err) != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []*bot.RunRecord
	var id string
	var data []byte
	var decodeErr error
	_, err = pgx.ForEachRow(rows, []any{&id, &data}, func() error {
		r, err := decode[bot.RunRecord](data, "run "+id)
		if err != nil {
			decodeErr = err
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		// A run that does not decode fails this listing, not the transaction.
		if decodeErr == nil {
			t.note(err)
		}
		return nil, fmt.Errorf("list runs: %w", err)
	}
	byID := make(map[string]*bot.RunRecord, len(out))
	for _, r := range out {
		byID[r.ID] = r
	}
	if err := t.loadItems(byID, true); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// RunIDs lists the IDs Runs would list, reading no record.
func (t *tx) RunIDs(f bot.RunFilter) ([]string, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list run ids: %w", err)
	}
	sql, args, err := t.runQuery("id", f)
	if err != nil {
		return nil, fmt.Errorf("list run ids: %w", err)
	}
	rows, err := t.query(sql, args...)
	if t.note(err) != nil {
		return nil, fmt.Errorf("list run ids: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if t.note(err) != nil {
		return nil, fmt.Errorf("list run ids: %w", err)
	}
	return out, nil
}

func (t *tx) Approval(id string) (*bot.Approval, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("get approval %s: %w", id, err)
	}
	data, err := t.getBytes("SELECT data FROM approvals WHERE id = $1"+t.forUpdate(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		t.markAbsent("approvals", id)
		return nil, fmt.Errorf("approval %s: %w", id, bot.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get approval %s: %w", id, err)
	}
	a, err := decode[bot.Approval](data, "approval "+id)
	if err != nil {
		t.db.quarantine.add(Quarantined{Bucket: "approvals", Key: id, Value: data, Reason: err.Error()})
		return nil, fmt.Errorf("%w (quarantined): %w", err, bot.ErrNotFound)
	}
	return a, nil
}

func (t *tx) PutApproval(a *bot.Approval) error {
	if a == nil {
		return errors.New("put approval: nil")
	}
	if a.ID == "" {
		return errors.New("put approval: empty key")
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("put approval %s: %w", a.ID, err)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("put approval %s: %w", a.ID, err)
	}
	sql := "INSERT INTO approvals (id, run_id, status, data) VALUES ($1, $2, $3, $4)"
	if !t.wasAbsent("approvals", a.ID) {
		sql += " ON CONFLICT (id) DO UPDATE SET run_id = EXCLUDED.run_id, status = EXCLUDED.status, data = EXCLUDED.data"
	}
	if err := t.write(sql, a.ID, a.RunID, string(a.Status), data); err != nil {
		return fmt.Errorf("put approval %s: %w", a.ID, err)
	}
	return nil
}

// Approvals lists approvals of one run, or all pending ones when runID is empty, oldest
// first; those asked at the same time in ID order, as bbolt lists them.
func (t *tx) Approvals(runID string) ([]*bot.Approval, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	sql, arg := "SELECT id, data FROM approvals WHERE run_id = $1 ORDER BY id", runID
	if runID == "" {
		sql, arg = "SELECT id, data FROM approvals WHERE status = $1 ORDER BY id", string(bot.ApprovalPending)
	}
	out, err := scan[bot.Approval](t, "approvals", "approval", sql+t.forUpdate(), arg)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *bot.Approval) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// scan decodes the data column of every row of sql, whose first column is the row's key,
// skipping (and quarantining) those that do not decode: one bad record must not hide the
// rest.
func scan[T any](t *tx, table, what, sql string, args ...any) ([]*T, error) {
	rows, err := t.query(sql, args...)
	if t.note(err) != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	var out []*T
	var key string
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&key, &data}, func() error {
		v, err := decode[T](data, what+" "+key)
		if err != nil {
			t.db.quarantine.add(Quarantined{Bucket: table, Key: key, Value: slices.Clone(data), Reason: err.Error()})
			return nil
		}
		out = append(out, v)
		return nil
	})
	if t.note(err) != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// Bounds of the times stored as nanoseconds since 1970.
var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

func checkNanoTime(at time.Time) error {
	if at.Before(minNanoTime) || at.After(maxNanoTime) {
		return fmt.Errorf("time %s is outside the years 1678 to 2262", at.Format(time.RFC3339))
	}
	return nil
}

// AppendAudit stores e after every entry appended before it: entries list in time order
// and entries with the same time in the order they were appended.
func (t *tx) AppendAudit(e bot.AuditEntry) error {
	if err := checkNanoTime(e.At); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	data, err := json.Marshal(&e)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := t.write("INSERT INTO audit (at_ns, run_id, data) VALUES ($1, $2, $3)", e.At.UnixNano(), e.RunID, data); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// Audit lists the entries of one run, or all, through an index in time order. It locks
// nothing even in Update: the log is only appended to.
func (t *tx) Audit(runID string) ([]bot.AuditEntry, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list audit entry: %w", err)
	}
	sql := "SELECT seq::text, data FROM audit ORDER BY at_ns, seq"
	var args []any
	if runID != "" {
		sql = "SELECT seq::text, data FROM audit WHERE run_id = $1 ORDER BY at_ns, seq"
		args = append(args, runID)
	}
	entries, err := scan[bot.AuditEntry](t, "audit", "audit entry", sql, args...)
	if err != nil {
		return nil, err
	}
	out := make([]bot.AuditEntry, len(entries))
	for i, e := range entries {
		out[i] = *e
	}
	return out, nil
}

// PutOutbox stores an item under its Key, replacing an older one with the same key.
func (t *tx) PutOutbox(item bot.OutboxItem) error {
	if item.Key == "" {
		return errors.New("put outbox item: empty key")
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("put outbox item %s: %w", item.Key, err)
	}
	data, err := json.Marshal(&item)
	if err != nil {
		return fmt.Errorf("put outbox item %s: %w", item.Key, err)
	}
	if err := t.write("INSERT INTO outbox (key, data) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data", item.Key, data); err != nil {
		return fmt.Errorf("put outbox item %s: %w", item.Key, err)
	}
	return nil
}

// Outbox lists the items oldest first (by CreatedAt, then key, as bbolt's stable sort of
// its key order gives), so that a thread's messages go out in the order they were asked
// for. The outbox holds only what is not yet sent, so sorting it here is cheap.
func (t *tx) Outbox() ([]bot.OutboxItem, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list outbox item: %w", err)
	}
	items, err := scan[bot.OutboxItem](t, "outbox", "outbox item", "SELECT key, data FROM outbox ORDER BY key"+t.forUpdate())
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(items, func(a, b *bot.OutboxItem) int { return a.CreatedAt.Compare(b.CreatedAt) })
	out := make([]bot.OutboxItem, len(items))
	for i, it := range items {
		out[i] = *it
	}
	return out, nil
}

// DeleteOutbox removes the item with key. A missing key is not an error: the item was sent
// and deleted before.
func (t *tx) DeleteOutbox(key string) error {
	if err := t.check(true); err != nil {
		return fmt.Errorf("delete outbox item %s: %w", key, err)
	}
	if err := t.write("DELETE FROM outbox WHERE key = $1", key); err != nil {
		return fmt.Errorf("delete outbox item %s: %w", key, err)
	}
	return nil
}

// RunBrief reads run id as Run does without reading its messages, which no card shows.
func (t *tx) RunBrief(id string) (*bot.RunRecord, error) {
	r, err := t.fullRun(id, false)
	if err != nil {
		return nil, err
	}
	if r.State != nil {
		r.State.Messages = nil
	}
	return r, nil
}

// PutRunHead stores r's fields other than State and Status, keeping the stored state and
// status: r.State must be nil, and the run must exist. The run's items are not read or
// written: a card's reference costs a row of a few kilobytes, not the conversation.
func (t *tx) PutRunHead(r *bot.RunRecord) error {
	if r == nil || r.ID == "" {
		return errors.New("put run head: no run id")
	}
	if r.State != nil {
		return fmt.Errorf("put run head %s: a head carries no state", r.ID)
	}
	if err := t.check(true); err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	stored, err := t.run(r.ID, "data", "run")
	if err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	rec := *r
	rec.State, rec.Status = stored.State, stored.Status
	if err := t.putRunRow(&rec); err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	return nil
}
