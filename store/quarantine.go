package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	bolt "go.etcd.io/bbolt"
)

// Quarantine.
//
// A record that does not decode (a flipped bit, a file edited by hand, a bug of an older
// version) must not stop the records around it: the dispatcher lists the whole outbox on
// every pass, and one bad item would fail every pass, so nothing would ever be posted
// again. So a getter or a scan that meets one in the buckets below treats it as absent, and
// once its transaction has ended the record is moved, in a write of its own, to the
// quarantine bucket, where `loopbot db check` lists it; the hook given by WithQuarantineHook
// is told, so the operator hears of it.
//
// Runs are not quarantined: a run is four records kept in step (runs, run_ids, run_heads,
// runs_by_status), and one that does not decode fails the reads that name it, which Check
// reports.

// quarantinable are the buckets whose records are quarantined when they do not decode.
var quarantinable = map[string]bool{
	string(bucketConversations): true,
	string(bucketApprovals):     true,
	string(bucketActions):       true,
	string(bucketAudit):         true,
	string(bucketOutbox):        true,
	string(bucketFeedback):      true,
	string(bucketAutonomy):      true,
	string(bucketGrants):        true,
	string(bucketMemory):        true,
}

// Quarantined is a record moved aside because it did not decode.
type Quarantined struct {
	Bucket string    `json:"bucket"`
	Key    []byte    `json:"key"`
	Value  []byte    `json:"value"`
	Reason string    `json:"reason"` // why it did not decode, quoting none of it
	At     time.Time `json:"at"`     // when it was moved
}

// WithQuarantineHook sets a function told of every record the store quarantines, after
// the move has committed: the command logs it and counts it. It runs in the goroutine of
// the Update or View that found the record, after that transaction, and must not call the
// store.
func WithQuarantineHook(fn func(Quarantined)) Option {
	return func(o *options) { o.onQuarantine = fn }
}

// undecodable notes that the value under key in bucket did not decode. The value is
// copied: bbolt's memory is only valid inside the transaction.
func (t *tx) undecodable(bucket, key, value []byte, err error) {
	if t.db == nil || !quarantinable[string(bucket)] {
		return
	}
	t.db.qmu.Lock()
	defer t.db.qmu.Unlock()
	t.db.undecodable = append(t.db.undecodable, Quarantined{
		Bucket: string(bucket), Key: bytes.Clone(key), Value: bytes.Clone(value), Reason: decodeReason(err),
	})
}

// decodeReason says why a record did not decode without quoting any of it: the reason is
// logged, and the record may hold anything a thread said. (A time that does not parse,
// say, is quoted whole by its error.)
func decodeReason(err error) string {
	// unmarshal's errors are jsonv1's types, which are encoding/json's only under
	// GOEXPERIMENT=jsonv2.
	var syntax *jsonv1.SyntaxError
	var typ *jsonv1.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not JSON: broken at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 5" says the number
		return fmt.Sprintf("field %s holds a JSON %s where %s belongs", typ.Field, kind, typ.Type)
	}
	return "a field holds a value its type refuses"
}

// quarantineKey names a record in the quarantine bucket by where it was and what it held,
// so that the same record found by two readers at once is quarantined once.
func quarantineKey(q Quarantined) []byte {
	h := sha256.Sum256(q.Value)
	k := make([]byte, 0, len(q.Bucket)+len(q.Key)+2+8)
	k = append(k, q.Bucket...)
	k = append(k, 0)
	k = append(k, q.Key...)
	k = append(k, 0)
	return append(k, h[:8]...)
}

// quarantine moves the records noted as undecodable to the quarantine bucket, deleting
// each from its bucket if it still holds the same value (a writer may have replaced it
// meanwhile, and the copy is kept all the same), and tells the hook of each one new to the
// quarantine. A failed move is not retried here: the record is still in place, so the next
// reader notes it again.
func (db *DB) quarantine() {
	db.qmu.Lock()
	found := db.undecodable
	db.undecodable = nil
	db.qmu.Unlock()
	if len(found) == 0 {
		return
	}
	var moved []Quarantined
	err := guard(func() error {
		return db.bolt.Update(func(btx *bolt.Tx) error {
			moved = moved[:0]
			qb := btx.Bucket(bucketQuarantine)
			if qb == nil {
				return fmt.Errorf("bucket %s is missing", bucketQuarantine)
			}
			now := time.Now().UTC()
			for _, q := range found {
				if b := btx.Bucket([]byte(q.Bucket)); b != nil && bytes.Equal(b.Get(q.Key), q.Value) {
					if err := b.Delete(q.Key); err != nil {
						return err
					}
					if q.Bucket == string(bucketConversations) || q.Bucket == string(bucketAutonomy) {
						// Its notes or its level are gone: runs read again (boundary.go).
						btx.OnCommit(func() { db.boundary.Add(1) })
					}
				}
				key := quarantineKey(q)
				if qb.Get(key) != nil {
					continue
				}
				q.At = now
				data, err := json.Marshal(&q)
				if err != nil {
					return err
				}
				if err := qb.Put(key, data); err != nil {
					return err
				}
				moved = append(moved, q)
			}
			return nil
		})
	})
	if err != nil {
		db.storeError(fmt.Errorf("quarantine: %w", err))
		return
	}
	if db.onQuarantine != nil {
		for _, q := range moved {
			db.onQuarantine(q)
		}
	}
}

// Quarantine lists the quarantined records, grouped by the bucket they were in.
func (db *DB) Quarantine(ctx context.Context) ([]Quarantined, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Quarantined
	err := db.bolt.View(func(btx *bolt.Tx) error {
		var err error
		out, err = listQuarantine(btx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list quarantine: %w", err)
	}
	return out, nil
}

func listQuarantine(btx *bolt.Tx) ([]Quarantined, error) {
	qb := btx.Bucket(bucketQuarantine)
	if qb == nil {
		// A file from before the quarantine, opened read-only.
		return nil, nil
	}
	var out []Quarantined
	err := qb.ForEach(func(k, v []byte) error {
		q, err := decode[Quarantined](v, fmt.Sprintf("quarantined record %q", k))
		if err != nil {
			return err
		}
		out = append(out, *q)
		return nil
	})
	return out, err
}
