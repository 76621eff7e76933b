package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// tx is the bot.Tx handed to the functions of Update and View. It wraps one bbolt
// transaction and refuses to be used once that function has returned, when bbolt may
// already have committed or rolled back underneath it.
type tx struct {
	btx    *bolt.Tx
	closed bool
	// wrote is set before the first change to btx: a group commit needs no rollback for a
	// function that failed before it changed anything, nor a sync for a group that changed
	// nothing.
	wrote bool
	// counted is set once the transaction is to count in BoundaryWrites (boundary.go).
	counted bool
	// db is told of records that do not decode, to quarantine them (quarantine.go).
	db *DB
}

var _ bot.Tx = (*tx)(nil)

func (t *tx) bucket(name []byte) (*bolt.Bucket, error) {
	if t.closed {
		return nil, ErrTxClosed
	}
	b := t.btx.Bucket(name)
	if b == nil {
		// Open creates every bucket, so this is a damaged file, not a missing record.
		return nil, fmt.Errorf("bucket %s is missing", name)
	}
	return b, nil
}

// get decodes the value under key, or returns an error wrapping bot.ErrNotFound.
func get[T any](t *tx, bucket []byte, key, what string) (*T, error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", what, key, err)
	}
	data := b.Get([]byte(key))
	if data == nil {
		return nil, fmt.Errorf("%s %s: %w", what, key, bot.ErrNotFound)
	}
	v, err := decode[T](data, what+" "+key)
	if err != nil && quarantinable[string(bucket)] {
		// A record that cannot be read is as good as absent; it is moved aside once
		// this transaction ends.
		t.undecodable(bucket, []byte(key), data, err)
		return nil, fmt.Errorf("%w (quarantined): %w", err, bot.ErrNotFound)
	}
	return v, err
}

// put stores v as JSON under key.
func put(t *tx, bucket []byte, key, what string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	return putData(t, bucket, key, what, data)
}

// putData stores data, a value encoded already, under key.
func putData(t *tx, bucket []byte, key, what string, data []byte) error {
	if key == "" {
		return fmt.Errorf("put %s: empty key", what)
	}
	b, err := t.bucket(bucket)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	t.wrote = true
	if err := b.Put([]byte(key), data); err != nil {
		return fmt.Errorf("put %s %s: %w", what, key, err)
	}
	return nil
}

// scan decodes every value of a bucket, in key order, and keeps those keep accepts.
func scan[T any](t *tx, bucket []byte, what string, keep func(*T) bool) ([]*T, error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	var out []*T
	err = b.ForEach(func(k, v []byte) error {
		rec, err := decode[T](v, what+" "+string(k))
		if err != nil && quarantinable[string(bucket)] {
			// One bad record must not hide the rest: it is skipped, and moved aside
			// once this transaction ends.
			t.undecodable(bucket, k, v, err)
			return nil
		}
		if err != nil {
			return err
		}
		if keep(rec) {
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// Runs are stored under a key taken from the runs bucket's sequence when the run is first
// put, so the bucket's order is creation order whatever the clocks said. run_ids maps a run
// ID to that key, which makes Run a direct lookup. run_heads holds each run without its
// agent state under the same key, and runs_by_status lists the keys of each status in
// creation order; PutRun keeps both in step with runs.

// runKey returns the key in runs of run id, or nil when it is not stored.
func (t *tx) runKey(id string) ([]byte, error) {
	ids, err := t.bucket(bucketRunIDs)
	if err != nil {
		return nil, err
	}
	return ids.Get([]byte(id)), nil
}

func (t *tx) Run(id string) (*bot.RunRecord, error) { return t.getRun(id, true) }

// RunBrief reads run id as Run does, without reading its messages.
func (t *tx) RunBrief(id string) (*bot.RunRecord, error) {
	r, err := t.getRun(id, false)
	if err != nil {
		return nil, err
	}
	if r.State != nil {
		r.State.Messages = nil
	}
	return r, nil
}

// getRun reads run id, with its messages when withMessages is set.
func (t *tx) getRun(id string, withMessages bool) (*bot.RunRecord, error) {
	key, err := t.runKey(id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	if key == nil {
		return nil, fmt.Errorf("run %s: %w", id, bot.ErrNotFound)
	}
	runs, err := t.bucket(bucketRuns)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	data := runs.Get(key)
	if data == nil {
		return nil, fmt.Errorf("get run %s: the index names a missing record", id)
	}
	return t.loadRun(key, data, id, withMessages)
}

// loadRun decodes the run stored under key and reads its items: its calls, and its
// messages when withMessages is set.
func (t *tx) loadRun(key, data []byte, id string, withMessages bool) (*bot.RunRecord, error) {
	r, err := decode[bot.RunRecord](data, "run "+id)
	if err != nil {
		return nil, err
	}
	items, err := t.bucket(bucketRunItems)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	if err := loadRunItems(items, key, r, withMessages); err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// RunHeader reads run id from run_heads, a value of a few hundred bytes, where Run decodes
// the whole agent state.
func (t *tx) RunHeader(id string) (*bot.RunRecord, error) {
	key, err := t.runKey(id)
	if err != nil {
		return nil, fmt.Errorf("get run head %s: %w", id, err)
	}
	if key == nil {
		return nil, fmt.Errorf("run %s: %w", id, bot.ErrNotFound)
	}
	heads, err := t.bucket(bucketRunHeads)
	if err != nil {
		return nil, fmt.Errorf("get run head %s: %w", id, err)
	}
	data := heads.Get(key)
	if data == nil {
		return nil, fmt.Errorf("get run head %s: the index names a missing head", id)
	}
	if rec, ok := t.db.heads.get(id, data); ok {
		return rec, nil
	}
	return decode[bot.RunRecord](data, "run head "+id)
}

// PutRun stores r. When r carries a State, the stored Status is the State's, so the two
// can never disagree; r itself is not changed.
func (t *tx) PutRun(r *bot.RunRecord) error {
	if r == nil || r.ID == "" {
		return errors.New("put run: no run id")
	}
	if r.PauseBy != "" {
		t.boundaryWritten()
	}
	rec := *r
	if rec.State != nil {
		if rec.State.RunID != rec.ID {
			return fmt.Errorf("put run %s: state belongs to run %q", rec.ID, rec.State.RunID)
		}
		rec.Status = rec.State.Status
	}
	if bytes.IndexByte([]byte(rec.Status), 0) >= 0 {
		// The NUL byte ends the status in a runs_by_status key.
		return fmt.Errorf("put run %s: status %q contains a NUL byte", rec.ID, rec.Status)
	}
	// The state's messages and calls are stored as run items (runitems.go), each written
	// only when it is new or changed. The caller's goroutine has usually encoded them
	// already (encoded.go).
	enc, err := encodingOf(r)
	if err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	rec.State, rec.Encoded = nil, nil
	h := head(&rec)
	headData, err := json.Marshal(&h)
	if err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	t.db.heads.put(&h, headData)
	var rest json.RawMessage
	if enc != nil {
		rest = enc.rest
	}
	data, err := recordData(&rec, headData, rest)
	if err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	key, err := t.putRun(rec.ID, rec.Status, data, headData)
	if err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	items, err := t.bucket(bucketRunItems)
	if err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	if err := putRunItems(items, key, enc); err != nil {
		return fmt.Errorf("put run %s: %w", rec.ID, err)
	}
	return nil
}

// PutRunHead rewrites the run's record without its state's lists, and its head, with r's
// fields other than State and Status: a few hundred bytes each, where PutRun would encode
// every message and call of the state to find those that changed.
func (t *tx) PutRunHead(r *bot.RunRecord) error {
	if r == nil || r.ID == "" {
		return errors.New("put run head: no run id")
	}
	if r.State != nil {
		return fmt.Errorf("put run head %s: a head carries no state", r.ID)
	}
	if r.PauseBy != "" {
		t.boundaryWritten()
	}
	key, err := t.runKey(r.ID)
	if err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	if key == nil {
		return fmt.Errorf("put run head %s: %w", r.ID, bot.ErrNotFound)
	}
	runs, err := t.bucket(bucketRuns)
	if err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	heads, err := t.bucket(bucketRunHeads)
	if err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	data, headData, err := runWithHead(runs.Get(key), heads.Get(key), r)
	if err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	t.wrote = true
	if err := errors.Join(runs.Put(key, data), heads.Put(key, headData)); err != nil {
		return fmt.Errorf("put run head %s: %w", r.ID, err)
	}
	return nil
}

// putRun writes a run's record and head under its key, taking a new key for a new run, and
// moves its status index entry when the status changed. It returns the key.
func (t *tx) putRun(id string, status agent.Status, data, headData []byte) ([]byte, error) {
	ids, err := t.bucket(bucketRunIDs)
	if err != nil {
		return nil, err
	}
	runs, err := t.bucket(bucketRuns)
	if err != nil {
		return nil, err
	}
	heads, err := t.bucket(bucketRunHeads)
	if err != nil {
		return nil, err
	}
	byStatus, err := t.bucket(bucketRunsByStatus)
	if err != nil {
		return nil, err
	}
	t.wrote = true
	key := bytes.Clone(ids.Get([]byte(id)))
	if key == nil {
		seq, err := runs.NextSequence()
		if err != nil {
			return nil, err
		}
		key = seqKey(seq)
		if err := ids.Put([]byte(id), key); err != nil {
			return nil, err
		}
	} else {
		old := heads.Get(key)
		if old == nil {
			return nil, errors.New("the stored run has no head")
		}
		if byStatus.Get(statusKey(status, key)) != nil {
			// Its index entry is already in place, as it is at every step but the few
			// that change the status: no need to decode the old head to learn its status.
			return key, errors.Join(runs.Put(key, data), heads.Put(key, headData))
		}
		h, err := decode[struct {
			Status agent.Status `json:"status"`
		}](old, "run head "+id)
		if err != nil {
			return nil, err
		}
		if err := byStatus.Delete(statusKey(h.Status, key)); err != nil {
			return nil, err
		}
	}
	return key, errors.Join(
		runs.Put(key, data),
		heads.Put(key, headData),
		byStatus.Put(statusKey(status, key), []byte(id)),
	)
}

// Runs lists runs in creation order, the order in which they were first put. Filtered by
// status, it reads only the runs of those statuses, through runs_by_status.
func (t *tx) Runs(f bot.RunFilter) ([]*bot.RunRecord, error) {
	runs, err := t.bucket(bucketRuns)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []*bot.RunRecord
	err = t.eachRun(f, func(key []byte, id string) error {
		data := runs.Get(key)
		if data == nil {
			return fmt.Errorf("run %s: the index names a missing record", id)
		}
		r, err := t.loadRun(key, data, id, true)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// RunIDs lists the IDs Runs would list. Filtered by status alone, it reads nothing but
// runs_by_status.
func (t *tx) RunIDs(f bot.RunFilter) ([]string, error) {
	var out []string
	err := t.eachRun(f, func(_ []byte, id string) error {
		out = append(out, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list run ids: %w", err)
	}
	return out, nil
}

// eachRun calls fn with the key in runs and the ID of each run f selects, in creation order,
// until f.Limit runs. It reads a run's head only to match a thread, or, without statuses to
// look up, to learn its ID.
func (t *tx) eachRun(f bot.RunFilter, fn func(key []byte, id string) error) error {
	if f.Limit < 0 {
		return fmt.Errorf("negative limit %d", f.Limit)
	}
	heads, err := t.bucket(bucketRunHeads)
	if err != nil {
		return err
	}
	n := 0
	visit := func(key []byte, id string, h *bot.RunRecord) (more bool, err error) {
		if f.Thread != nil {
			if h == nil {
				data := heads.Get(key)
				if data == nil {
					return false, fmt.Errorf("run %s: the index names a missing head", id)
				}
				if h, err = decode[bot.RunRecord](data, "run head "+id); err != nil {
					return false, err
				}
			}
			if h.Thread != *f.Thread {
				return true, nil
			}
		}
		if err := fn(key, id); err != nil {
			return false, err
		}
		n++
		return n != f.Limit, nil
	}
	if len(f.Statuses) == 0 {
		c := heads.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			h, err := decode[bot.RunRecord](v, "run head")
			if err != nil {
				return err
			}
			if more, err := visit(k, h.ID, h); err != nil || !more {
				return err
			}
		}
		return nil
	}
	byStatus, err := t.bucket(bucketRunsByStatus)
	if err != nil {
		return err
	}
	return mergeStatuses(byStatus, f.Statuses, func(key []byte, id string) (bool, error) {
		return visit(key, id, nil)
	})
}

// mergeStatuses walks the runs_by_status ranges of statuses side by side, one cursor each,
// and calls fn with each entry's run key and ID in creation order, until fn says no more.
func mergeStatuses(byStatus *bolt.Bucket, statuses []agent.Status, fn func(key []byte, id string) (more bool, err error)) error {
	type rng struct {
		c      *bolt.Cursor
		prefix []byte
		k, v   []byte // the entry at the cursor, nil past the range's end
	}
	next := func(r *rng, k, v []byte) error {
		r.k, r.v = nil, nil
		if k == nil || !bytes.HasPrefix(k, r.prefix) {
			return nil
		}
		if len(k) != len(r.prefix)+runKeyLen {
			return fmt.Errorf("status index entry %q is not a status and a run key", k)
		}
		r.k, r.v = k, v
		return nil
	}
	var rs []*rng
	for _, s := range statuses {
		prefix := statusKey(s, nil)
		if slices.ContainsFunc(rs, func(r *rng) bool { return bytes.Equal(r.prefix, prefix) }) {
			continue
		}
		r := &rng{c: byStatus.Cursor(), prefix: prefix}
		k, v := r.c.Seek(prefix)
		if err := next(r, k, v); err != nil {
			return err
		}
		rs = append(rs, r)
	}
	for {
		var first *rng
		for _, r := range rs {
			if r.k != nil && (first == nil || bytes.Compare(r.k[len(r.prefix):], first.k[len(first.prefix):]) < 0) {
				first = r
			}
		}
		if first == nil {
			return nil
		}
		more, err := fn(first.k[len(first.prefix):], string(first.v))
		if err != nil || !more {
			return err
		}
		k, v := first.c.Next()
		if err := next(first, k, v); err != nil {
			return err
		}
	}
}

func (t *tx) Conversation(thread bot.ThreadRef) (*bot.Conversation, error) {
	return get[bot.Conversation](t, bucketConversations, thread.Key(), "conversation")
}

func (t *tx) PutConversation(c *bot.Conversation) error {
	if c == nil || !c.Thread.Valid() {
		return errors.New("put conversation: no valid thread")
	}
	if len(c.Notes) > 0 {
		t.boundaryWritten()
	}
	return put(t, bucketConversations, c.Thread.Key(), "conversation", c)
}

func (t *tx) Approval(id string) (*bot.Approval, error) {
	return get[bot.Approval](t, bucketApprovals, id, "approval")
}

func (t *tx) PutApproval(a *bot.Approval) error {
	if a == nil {
		return errors.New("put approval: nil")
	}
	return put(t, bucketApprovals, a.ID, "approval", a)
}

// Approvals scans the whole bucket: approvals are few (a handful per run, and old runs' can
// be pruned), so an index per run or status would cost more in upkeep than it saves.
func (t *tx) Approvals(runID string) ([]*bot.Approval, error) {
	out, err := scan(t, bucketApprovals, "approval", func(a *bot.Approval) bool {
		if runID == "" {
			return a.Status == bot.ApprovalPending
		}
		return a.RunID == runID
	})
	if err != nil {
		return nil, err
	}
	// Key order is ID order, which means nothing to a reader; show them as they were asked.
	slices.SortStableFunc(out, func(a, b *bot.Approval) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (t *tx) Action(id string) (*bot.Action, error) {
	return get[bot.Action](t, bucketActions, id, "action")
}

func (t *tx) PutAction(a *bot.Action) error {
	if a == nil {
		return errors.New("put action: nil")
	}
	return put(t, bucketActions, a.ID, "action", a)
}

// Bounds of the times a key can hold: timeKey uses UnixNano.
var (
	minKeyTime = time.Unix(0, math.MinInt64)
	maxKeyTime = time.Unix(0, math.MaxInt64)
)

func checkKeyTime(t time.Time) error {
	if t.Before(minKeyTime) || t.After(maxKeyTime) {
		return fmt.Errorf("time %s is outside the years 1678 to 2262", t.Format(time.RFC3339))
	}
	return nil
}

// AppendAudit stores e under its time and the bucket's next sequence number, so entries
// list in time order and entries with the same time in the order they were appended.
func (t *tx) AppendAudit(e bot.AuditEntry) error {
	if err := checkKeyTime(e.At); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	audit, err := t.bucket(bucketAudit)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	t.wrote = true
	seq, err := audit.NextSequence()
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	data, err := json.Marshal(&e)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := audit.Put(append(timeKey(e.At), seqKey(seq)...), data); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// Audit scans the whole log even for one run. The log only grows by decisions, which are
// rare next to steps; an index by run can come when a deployment's log makes this slow.
func (t *tx) Audit(runID string) ([]bot.AuditEntry, error) {
	entries, err := scan(t, bucketAudit, "audit entry", func(e *bot.AuditEntry) bool {
		return runID == "" || e.RunID == runID
	})
	if err != nil {
		return nil, err
	}
	out := make([]bot.AuditEntry, len(entries))
	for i, e := range entries {
		out[i] = *e
	}
	return out, nil
}

func (t *tx) PutOutbox(item bot.OutboxItem) error {
	data, err := encodeOutboxItem(&item)
	if err != nil {
		return fmt.Errorf("put outbox item %s: %w", item.Key, err)
	}
	return putData(t, bucketOutbox, item.Key, "outbox item", data)
}

// DeleteOutbox removes the item with key. A missing key is not an error: the item was sent
// and deleted before.
func (t *tx) DeleteOutbox(key string) error {
	b, err := t.bucket(bucketOutbox)
	if err != nil {
		return fmt.Errorf("delete outbox item %s: %w", key, err)
	}
	t.wrote = true
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("delete outbox item %s: %w", key, err)
	}
	return nil
}
