package store

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// Check checks the whole file: its structure as damage.go does at open (bbolt's
// consistency check included), that the index buckets agree with the buckets they index,
// and that every record of a quarantinable bucket decodes. It returns the first problem
// found, or nil.
func (db *DB) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	info, err := os.Stat(db.path)
	if err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	var problems []error
	err = guard(func() error {
		return db.bolt.View(func(btx *bolt.Tx) error {
			problems = checkTx(btx, info.Size())
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("check store: %w", problems[0])
	}
	return nil
}

// Report is what CheckFile found.
type Report struct {
	Path string
	Size int64 // bytes
	// Problems are what is wrong, at most a few dozen; none for a sound file.
	Problems []error
	// Quarantined are the records moved aside because they did not decode. They are not
	// problems of the file, but each is something the bot lost.
	Quarantined []Quarantined
}

// CheckFile checks the database at path as Check does, opened read-only (it waits for the
// lock as Open does, so it fails with ErrLocked while loopbot runs on the file), and lists
// its quarantine. The error is for a file that could not be checked at all, wrapping
// ErrDamaged when bbolt cannot open it.
func CheckFile(ctx context.Context, path string, opts ...Option) (*Report, error) {
	o, info, err := offline(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("check store: %w", err)
	}
	if err := inspect(path, o.lockTimeout, false, func(btx *bolt.Tx) []error { return length(btx, info.Size()) }); err != nil {
		return nil, err
	}
	bdb, err := openReadOnly(path, o.lockTimeout, true)
	if err != nil {
		return nil, err
	}
	defer bdb.Close()
	r := &Report{Path: path, Size: info.Size()}
	err = guard(func() error {
		return bdb.View(func(btx *bolt.Tx) error {
			r.Problems = checkTx(btx, info.Size())
			if len(r.Problems) > 0 {
				return nil
			}
			q, err := listQuarantine(btx)
			if err != nil {
				r.Problems = append(r.Problems, err)
			}
			r.Quarantined = q
			return nil
		})
	})
	if err != nil {
		r.Problems = append(r.Problems, err)
	}
	return r, nil
}

// checkTx returns what is wrong in btx, at most a few dozen problems. The indexes and
// records are looked at only in a file whose structure is sound.
func checkTx(btx *bolt.Tx, fileSize int64) []error {
	if problems := structure(btx, fileSize); len(problems) > 0 {
		return problems
	}
	var problems []error
	for _, check := range []func(*bolt.Tx) error{checkRunIndex, checkRunHeads, checkRunItems, checkEventIndex, checkRunLeases} {
		if err := check(btx); err != nil {
			problems = append(problems, err)
		}
	}
	return append(problems, checkRecords(btx)...)
}

// decoders decode the records of each quarantinable bucket, for checkRecords.
var decoders = map[string]func(data []byte, what string) error{
	string(bucketConversations): decodes[bot.Conversation],
	string(bucketApprovals):     decodes[bot.Approval],
	string(bucketActions):       decodes[bot.Action],
	string(bucketAudit):         decodes[bot.AuditEntry],
	string(bucketOutbox):        decodes[bot.OutboxItem],
	string(bucketFeedback):      decodes[bot.Feedback],
	string(bucketAutonomy):      decodes[bot.ChannelAutonomy],
	string(bucketGrants):        decodes[bot.ChannelGrant],
	string(bucketMemory):        decodes[bot.MemoryFact],
	string(bucketInbox):         decodes[bot.InboxEntry],
}

func decodes[T any](data []byte, what string) error {
	_, err := decode[T](data, what)
	return err
}

// checkRecords reports each record of a quarantinable bucket that does not decode: the bot
// would quarantine it when it reads it.
func checkRecords(btx *bolt.Tx) []error {
	var problems []error
	for name := range quarantinable {
		b := btx.Bucket([]byte(name))
		if b == nil {
			problems = append(problems, fmt.Errorf("bucket %s is missing", name))
			continue
		}
		_ = b.ForEach(func(k, v []byte) error {
			if err := decoders[name](v, fmt.Sprintf("%s record %q", name, k)); err != nil && len(problems) < maxProblems {
				problems = append(problems, err)
			}
			return nil
		})
	}
	slices.SortFunc(problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return problems
}

// checkRunIndex checks that run_ids and runs are a one-to-one map whose records carry the
// IDs they are indexed by.
func checkRunIndex(btx *bolt.Tx) error {
	runs, ids := btx.Bucket(bucketRuns), btx.Bucket(bucketRunIDs)
	if runs == nil || ids == nil {
		return fmt.Errorf("run buckets missing")
	}
	n := 0
	err := ids.ForEach(func(id, key []byte) error {
		n++
		data := runs.Get(key)
		if data == nil {
			return fmt.Errorf("run %s: index names missing key %x", id, key)
		}
		r, err := decode[struct {
			ID string `json:"id"`
		}](data, "run "+string(id))
		if err != nil {
			return err
		}
		if r.ID != string(id) {
			return fmt.Errorf("run %s: index names the record of run %s", id, r.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got := runs.Stats().KeyN; got != n {
		return fmt.Errorf("%d runs but %d run index entries", got, n)
	}
	return nil
}

// checkEventIndex checks that every claim has exactly its one expiry index entry.
func checkEventIndex(btx *bolt.Tx) error {
	events, index := btx.Bucket(bucketEvents), btx.Bucket(bucketEventExpiry)
	if events == nil || index == nil {
		return fmt.Errorf("event buckets missing")
	}
	n := 0
	err := events.ForEach(func(id, v []byte) error {
		n++
		c, err := decode[claim](v, "event claim "+string(id))
		if err != nil {
			return err
		}
		if index.Get(expiryKey(c.ExpiresAt, string(id))) == nil {
			return fmt.Errorf("event claim %s has no expiry index entry", id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m := 0
	err = index.ForEach(func(k, _ []byte) error {
		m++
		if len(k) < 8 || events.Get(k[8:]) == nil {
			return fmt.Errorf("expiry index entry %x names no claim", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n != m {
		return fmt.Errorf("%d event claims but %d expiry index entries", n, m)
	}
	return nil
}

// checkRunHeads checks that every run has its head, equal to the record without its state,
// and exactly one status index entry, for its status and naming its ID; and that neither
// bucket holds anything else.
func checkRunHeads(btx *bolt.Tx) error {
	runs, heads, byStatus := btx.Bucket(bucketRuns), btx.Bucket(bucketRunHeads), btx.Bucket(bucketRunsByStatus)
	if runs == nil || heads == nil || byStatus == nil {
		return fmt.Errorf("run buckets missing")
	}
	n := 0
	err := runs.ForEach(func(key, data []byte) error {
		n++
		r, err := decode[bot.RunRecord](data, fmt.Sprintf("run %x", key))
		if err != nil {
			return err
		}
		hd := heads.Get(key)
		if hd == nil {
			return fmt.Errorf("run %s has no head", r.ID)
		}
		h, err := decode[bot.RunRecord](hd, "run head "+r.ID)
		if err != nil {
			return err
		}
		if want := head(r); !reflect.DeepEqual(*h, want) {
			return fmt.Errorf("run %s: head %s disagrees with the record", r.ID, hd)
		}
		id := byStatus.Get(statusKey(r.Status, key))
		if id == nil {
			return fmt.Errorf("run %s has no status index entry for %q", r.ID, r.Status)
		}
		if string(id) != r.ID {
			return fmt.Errorf("run %s: its status index entry names run %s", r.ID, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got := heads.Stats().KeyN; got != n {
		return fmt.Errorf("%d runs but %d run heads", n, got)
	}
	// Every run has its entry, so a count above the runs' is an entry for a run that does
	// not exist or a second one for a run under a status it no longer has.
	m := 0
	err = byStatus.ForEach(func(k, _ []byte) error {
		m++
		i := len(k) - runKeyLen - 1
		if i < 0 || k[i] != 0 {
			return fmt.Errorf("status index entry %q is not a status and a run key", k)
		}
		hd := heads.Get(k[i+1:])
		if hd == nil {
			return fmt.Errorf("status index entry %q names no run", k)
		}
		h, err := decode[bot.RunRecord](hd, fmt.Sprintf("run head %x", k[i+1:]))
		if err != nil {
			return err
		}
		if string(h.Status) != string(k[:i]) {
			return fmt.Errorf("status index lists run %s as %q, but it is %q", h.ID, k[:i], h.Status)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if m != n {
		return fmt.Errorf("%d runs but %d status index entries", n, m)
	}
	return nil
}

// offline prepares a command that works on the file at path without serving it (check,
// compact): the options, and the file as it is now.
func offline(ctx context.Context, path string, opts []Option) (options, os.FileInfo, error) {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ctx.Err(); err != nil {
		return o, nil, err
	}
	info, err := os.Stat(path)
	return o, info, err
}
