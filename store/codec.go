package store

import (
	"encoding/binary"
	"fmt"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Records are stored as JSON of loopbot's own types, never of a library's, so that a
// library upgrade never changes what is on disk.

// claim is the stored value of one event claim.
type claim struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// head is the run_heads value of r: the record without its agent state, which is most of
// it, so that what the bot decides on (the status, the thread, the card) reads cheaply.
func head(r *bot.RunRecord) bot.RunRecord {
	h := *r
	h.State = nil
	return h
}

// statusKey is the runs_by_status key of the run stored under key in runs: the status
// first, so that one status's runs are a range in creation order, and a NUL byte to end
// it, which PutRun refuses in a status.
func statusKey(status agent.Status, key []byte) []byte {
	k := make([]byte, 0, len(status)+1+len(key))
	k = append(k, status...)
	k = append(k, 0)
	return append(k, key...)
}

// runKeyLen is the length of a key in runs, a sequence number from seqKey.
const runKeyLen = 8

// decode unmarshals a stored value. what names the record in the error.
func decode[T any](data []byte, what string) (*T, error) {
	v := new(T)
	if err := unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return v, nil
}

// unmarshal decodes a stored value with encoding/json's rules (jsonv1) on the
// implementation of encoding/json/v2 (the go-json-experiment module is its mirror, and the
// standard library's encoding/json runs on the same code under GOEXPERIMENT=jsonv2). It
// decodes a run's head in about a quarter of encoding/json's time, and reads are much of
// what the store's one writer does: every checkpoint reads the run's head, every sent card
// the run it shows. Records are still written by encoding/json, so the bytes on disk do not
// change.
func unmarshal(data []byte, v any) error { return jsonv1.Unmarshal(data, v) }

// timeKey encodes t as 8 bytes that sort in time order. Flipping the sign bit of the
// nanosecond count makes times before 1970 sort before those after. UnixNano is only
// defined between the years 1678 and 2262.
func timeKey(t time.Time) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(t.UnixNano())^(1<<63))
	return b
}

// seqKey encodes a bucket sequence number as 8 bytes that sort in order.
func seqKey(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// expiryKey is the event_expiry index key of a claim: expiry first so that a purge is a
// range scan from the start of the bucket.
func expiryKey(expires time.Time, id string) []byte {
	return append(timeKey(expires), id...)
}
