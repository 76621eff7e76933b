package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// The intake journal.
//
// The events a platform waits to see acknowledged (bot.Bot.Accept) must be durable before
// the acks, and a bbolt commit costs two disk syncs (its pages, then its meta page), serial
// on the ack's path. So the events are written first to a journal beside the database
// (loopbot.db.intake): one write and one fdatasync a batch, into a file made once at its
// full size and written with zeros (overwriting written blocks changes no file metadata,
// so the fdatasync commits nothing else; fallocate's unwritten extents would). The next
// write transaction that touches the inbox (the claim of one of the events, or the removal
// of a handled one) moves the journaled entries into the inbox bucket, and records in the
// meta bucket how far the journal has been moved: that position, committed with the
// entries, is the only truth, so a transaction rolled back or run again moves again, and
// no commit needs a callback. Open moves what a crash left behind; Close moves everything,
// so a stopped loopbot's database is whole without its journal.
//
// The journal is written from its start in generations: once everything written has been
// moved, the next batch starts a new generation at the beginning. A scan (Open) reads the
// stored generation from the stored offset on, or the next generation from the start,
// and stops at the first record that is torn, of another generation, or the file's zeros
// (intake_record.go). Every write goes through one writer (wmu), from the check for
// duplicates to the sync, as bbolt's writes go through its one writer, and the calls that
// wait for it meanwhile are written together.
//
// The journal is made in the background after Open, so a start does not wait for it, and
// until it is ready, for a batch larger than the journal, and after the journal failed a
// write, Accept stores the events in a bbolt transaction as before: its AddInbox moves
// the journal's entries first, so it finds them.

const (
	// intakeSize is the journal's size: a burst of 500 Slack mentions takes about 190 KB.
	intakeSize = 256 << 10
	// intakeHeader is the file's header: intakeMagic and the journal's ID, which the
	// position stored in the database names, so that a journal left beside another
	// database (or made again) is never read as this one's.
	intakeHeader = 16
)

var (
	intakeMagic = []byte("loopbotJ")
	// metaIntake is the journal's position in the meta bucket: its ID (8 bytes), the
	// generation and the offset moved through (4 bytes each), little-endian.
	metaIntake = []byte("intake_position")
)

// IntakeReplayed is how many accepted events Open found in the intake journal and moved
// into the inbox: those an earlier process acknowledged and had not yet moved when it
// ended without Close.
func (db *DB) IntakeReplayed() int {
	if db.intake == nil {
		return 0
	}
	return db.intake.replayed
}

// IntakePath is where the intake journal of the database at path is kept.
func IntakePath(path string) string { return path + ".intake" }

// position is a place in the journal: a generation, and an offset in the file.
type position struct {
	gen uint32
	off uint32
}

// after reports whether p comes after q.
func (p position) after(q position) bool {
	return p.gen > q.gen || p.gen == q.gen && p.off > q.off
}

// nextGen returns the generation after gen, which is never 0.
func nextGen(gen uint32) uint32 {
	if gen == ^uint32(0) {
		return 1
	}
	return gen + 1
}

// storedPosition reads how far the journal id has been moved into btx's inbox: the start
// for a journal the database does not name.
func storedPosition(btx *bolt.Tx, id uint64) position {
	v := btx.Bucket(bucketMeta).Get(metaIntake)
	if len(v) != 16 || binary.LittleEndian.Uint64(v) != id {
		return position{}
	}
	return position{gen: binary.LittleEndian.Uint32(v[8:]), off: binary.LittleEndian.Uint32(v[12:])}
}

func putPosition(btx *bolt.Tx, id uint64, p position) error {
	v := make([]byte, 16)
	binary.LittleEndian.PutUint64(v, id)
	binary.LittleEndian.PutUint32(v[8:], p.gen)
	binary.LittleEndian.PutUint32(v[12:], p.off)
	if err := btx.Bucket(bucketMeta).Put(metaIntake, v); err != nil {
		return fmt.Errorf("put intake position: %w", err)
	}
	return nil
}

// intakeRecord is one journaled inbox entry.
type intakeRecord struct {
	end  position // just after the record
	id   string   // the event's
	data []byte   // the entry, as the inbox bucket keeps it
}

// intake is a database's journal.
type intake struct {
	path string

	// The calls to AcceptInbox waiting for the one writing (qmu).
	qmu     sync.Mutex
	queue   []*acceptance
	writing bool

	// The writer's state (wmu, held from the check for duplicates through the sync).
	wmu sync.Mutex
	f   *os.File // nil until the journal is ready, and after it closed or failed
	gen uint32   // the generation being written
	off int64    // where the next record goes
	// turned is the committed position seen when gen was started; the records before it
	// are let go at the next start of a generation.
	turned position
	closed bool
	writes int // batches written, for tests
	// syncData makes what was written durable (fdatasync); a test counts or fails it.
	syncData func(*os.File) error
	err      error // why the journal is not in use, when it failed
	// replayed is how many entries Open found in the journal not yet moved.
	replayed int

	// The records written (rmu): every record after base, in order.
	rmu  sync.Mutex
	id   uint64
	recs []intakeRecord
	ids  map[string]struct{} // the events of recs
	base position
	last position // recs' last end; the zero position when there is none

	stop context.CancelFunc
	made chan struct{} // closed when the background making of the file has ended
	// skipMove, set by tests, keeps the entries in the journal, as a crash between the
	// journal's sync and the next write transaction does.
	skipMove atomic.Bool
}

// nameIntake gives the database a journal, in the transaction Open makes anyway: its ID
// and the start of it as the position moved through. The journal file is made afterwards
// (in the background), and a file with another ID is never read as this database's.
func nameIntake(btx *bolt.Tx) error {
	if v := btx.Bucket(bucketMeta).Get(metaIntake); len(v) == 16 {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return putPosition(btx, binary.LittleEndian.Uint64(b[:])|1, position{})
}

// openIntake opens the journal beside db, moving into the inbox what an earlier process
// left in it, or starts making it in the background.
func openIntake(db *DB) (*intake, error) {
	j := &intake{path: IntakePath(db.path), made: make(chan struct{}), ids: map[string]struct{}{}, syncData: fdatasync}
	var stored position
	err := db.bolt.View(func(btx *bolt.Tx) error {
		v := btx.Bucket(bucketMeta).Get(metaIntake)
		if len(v) != 16 {
			return errors.New("the database names no intake journal")
		}
		j.id = binary.LittleEndian.Uint64(v)
		stored = storedPosition(btx, j.id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read intake position: %w", err)
	}
	f, id, err := openJournal(j.path)
	if err != nil {
		return nil, err
	}
	if f != nil && id == j.id {
		if err := j.replay(db, f, stored); err != nil {
			f.Close()
			return nil, err
		}
		close(j.made)
		j.stop = func() {}
		return j, nil
	}
	if f != nil {
		// Not this database's journal: it is made again.
		f.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.stop = cancel
	go j.make(ctx, stored)
	return j, nil
}

// openJournal opens the journal at path, or returns nil when there is none or the file is
// not a whole journal (one whose making was cut short is made again).
func openJournal(path string) (*os.File, uint64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open intake journal: %w", err)
	}
	var h [intakeHeader]byte
	st, err := f.Stat()
	if err == nil {
		_, err = f.ReadAt(h[:], 0)
	}
	if err != nil || st.Size() != intakeSize || string(h[:8]) != string(intakeMagic) {
		f.Close()
		return nil, 0, nil
	}
	return f, binary.LittleEndian.Uint64(h[8:]), nil
}

// replay moves into the inbox the records of journal f that the stored position has not
// reached, and makes the journal ready.
func (j *intake) replay(db *DB, f *os.File, stored position) error {
	recs, first, err := scanJournal(f, stored)
	if err != nil {
		return fmt.Errorf("read intake journal: %w", err)
	}
	if len(recs) > 0 {
		err := guard(func() error {
			return db.bolt.Update(func(btx *bolt.Tx) error {
				inbox := btx.Bucket(bucketInbox)
				for _, r := range recs {
					if err := inbox.Put([]byte(r.id), r.data); err != nil {
						return err
					}
				}
				return putPosition(btx, j.id, recs[len(recs)-1].end)
			})
		})
		if err != nil {
			return fmt.Errorf("move the intake journal into the inbox: %w", err)
		}
		stored = recs[len(recs)-1].end
		j.replayed = len(recs)
	}
	j.f = f
	// The next batch starts a generation newer than any the scan can meet.
	j.gen, j.off = nextGen(max(stored.gen, first)), intakeHeader
	j.turned, j.base = stored, stored
	return nil
}

// scanJournal reads the records of r that come after stored (see the top of this file), and
// returns them with the generation of the file's first record.
func scanJournal(r io.ReaderAt, stored position) (recs []intakeRecord, first uint32, err error) {
	var h [recordHeader]byte
	read := func(off int64, b []byte) (bool, error) {
		if off+int64(len(b)) > intakeSize {
			return false, nil
		}
		_, err := r.ReadAt(b, off)
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return err == nil, err
	}
	ok, err := read(intakeHeader, h[:])
	if err != nil {
		return nil, 0, err
	}
	if ok {
		first, _, _ = recordLength(h[:])
	}
	gen, off := stored.gen, int64(stored.off)
	switch {
	case first != 0 && first == nextGen(stored.gen):
		gen, off = first, intakeHeader
	case stored.gen == 0:
		return nil, first, nil
	}
	off = max(off, intakeHeader)
	for {
		if ok, err := read(off, h[:]); !ok {
			return recs, first, err
		}
		g, n, ok := recordLength(h[:])
		if !ok || g != gen {
			return recs, first, nil
		}
		rec := make([]byte, recordHeader+n)
		if ok, err := read(off, rec); !ok {
			return recs, first, err
		}
		_, payload, size, ok := decodeRecord(rec)
		if !ok {
			return recs, first, nil
		}
		id, ok := entryID(payload)
		if !ok {
			return recs, first, nil
		}
		off += int64(size)
		recs = append(recs, intakeRecord{end: position{gen: gen, off: uint32(off)}, id: id, data: payload})
	}
}

// entryID returns the event ID of the inbox entry data, or false when data is not one.
func entryID(data []byte) (string, bool) {
	var e struct {
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	if json.Unmarshal(data, &e) != nil || e.Event.ID == "" {
		return "", false
	}
	return e.Event.ID, true
}

// make writes the journal file in the background and makes it ready, from a generation
// after the stored one.
func (j *intake) make(ctx context.Context, stored position) {
	defer close(j.made)
	err := writeJournal(ctx, j.path, j.id)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(j.path, os.O_RDWR, 0)
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if err != nil || j.closed {
		j.err = err
		if f != nil {
			f.Close()
		}
		return
	}
	j.f, j.gen, j.off = f, nextGen(stored.gen), intakeHeader
	j.turned = stored
	j.rmu.Lock()
	j.base = stored
	j.rmu.Unlock()
}

// writeJournal makes the file at path: written whole with zeros and synced under another
// name, then renamed, and its directory synced.
func writeJournal(ctx context.Context, path string, id uint64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("make intake journal: %w", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	buf := make([]byte, 8<<10)
	copy(buf, intakeMagic)
	binary.LittleEndian.PutUint64(buf[8:], id)
	for off := 0; off < intakeSize; off += len(buf) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.WriteAt(buf, int64(off)); err != nil {
			return fmt.Errorf("make intake journal: %w", err)
		}
		clear(buf[:intakeHeader])
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("make intake journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("make intake journal: %w", err)
	}
	done = true
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("make intake journal: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// AcceptInbox stores evs in the inbox as entries of replica numbered from seq, as
// AddInbox does each, and reports which it added: false for one whose ID is waiting
// already, in the inbox or the journal, or earlier in evs. It returns once they are
// durable, in the journal (one write and one fdatasync) or in a bbolt transaction.
//
// Calls that arrive while the journal is being written wait together, and the first of
// them writes them all with one sync, as bbolt's group commit does (group.go): HTTP
// deliveries come one a request, many at once.
func (db *DB) AcceptInbox(ctx context.Context, replica string, seq int64, evs []bot.Event) ([]bool, error) {
	a := &acceptance{replica: replica, seq: seq, evs: evs, done: make(chan bool, 1)}
	j := db.intake
	if j == nil {
		db.acceptInTx(ctx, []*acceptance{a})
		return a.added, a.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.qmu.Lock()
	j.queue = append(j.queue, a)
	lead := !j.writing
	j.writing = true
	j.qmu.Unlock()
	if !lead && !<-a.done {
		return a.added, a.err
	}
	// a is first in the queue: it found no write under way, or was told to write when
	// first; the calls since came behind it.
	j.qmu.Lock()
	group := j.queue
	j.queue = nil
	j.qmu.Unlock()
	defer func() {
		// Deferred, so that the callers behind are told even if this one's goroutine ends.
		j.qmu.Lock()
		if len(j.queue) > 0 {
			j.queue[0].done <- true
		} else {
			j.writing = false
		}
		j.qmu.Unlock()
		for _, o := range group[1:] {
			o.done <- false
		}
	}()
	// The others' callers wait on this one's write: it does not end with this caller's
	// context.
	db.acceptGroup(context.WithoutCancel(ctx), group)
	return a.added, a.err
}

// acceptance is one AcceptInbox call: its events, and once it is written, its result.
type acceptance struct {
	replica string
	seq     int64
	evs     []bot.Event
	added   []bool
	err     error
	done    chan bool // true: write the queue; false: added and err are the result
}

// acceptGroup makes group's events durable with one write and one sync of the journal, or
// in one transaction when the journal cannot take them.
func (db *DB) acceptGroup(ctx context.Context, group []*acceptance) {
	j := db.intake
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.f == nil {
		db.acceptInTx(ctx, group)
		return
	}
	fail := func(err error) {
		for _, a := range group {
			a.added, a.err = nil, err
		}
	}
	stored, err := j.fresh(ctx, db, group)
	if err != nil {
		fail(fmt.Errorf("look up inbox: %w", err))
		return
	}
	// Each added event's record, the header filled in once the generation is known.
	size := 0
	for _, a := range group {
		for i, ev := range a.evs {
			if a.added[i] {
				size += recordHeader + 320 + len(ev.Text)
			}
		}
	}
	buf := make([]byte, 0, size)
	var starts []int
	var ids []string
	for _, a := range group {
		e := bot.InboxEntry{Replica: a.replica}
		for i, ev := range a.evs {
			if !a.added[i] {
				continue
			}
			var start int
			buf, start = beginRecord(buf)
			e.Seq, e.Event = a.seq+int64(i), ev
			if buf, err = appendInboxEntry(buf, &e); err != nil {
				fail(fmt.Errorf("put inbox entry %s: %w", ev.ID, err))
				return
			}
			starts, ids = append(starts, start), append(ids, ev.ID)
		}
	}
	if len(starts) == 0 {
		return
	}
	if intakeHeader+len(buf) > intakeSize {
		// Larger than the whole journal.
		db.acceptInTx(ctx, group)
		return
	}
	if j.off+int64(len(buf)) > intakeSize && j.lastPos().after(stored) {
		// Full: what it holds is moved into the inbox, and the batch starts it again.
		err := db.updateFirst(ctx, func(t *tx) error { return t.moveIntake() })
		if err == nil {
			err = db.do(ctx, false, func(t *tx) error {
				stored = storedPosition(t.btx, j.id)
				return nil
			})
		}
		if err != nil {
			fail(fmt.Errorf("move intake journal: %w", err))
			return
		}
	}
	if !j.lastPos().after(stored) && j.off > intakeHeader {
		j.turn(stored)
	}
	ends := make([]int, len(starts))
	for k, start := range starts {
		ends[k] = len(buf)
		if k+1 < len(starts) {
			ends[k] = starts[k+1]
		}
		endRecord(buf[:ends[k]], start, j.gen)
	}
	if err := j.write(buf); err != nil {
		// Not acknowledged, so a record that reached the disk anyway is an event the
		// platform delivers again: the claims make a second handling a duplicate.
		j.err = err
		j.f.Close()
		j.f = nil
		db.acceptInTx(ctx, group)
		return
	}
	recs := make([]intakeRecord, len(starts))
	for k, start := range starts {
		recs[k] = intakeRecord{end: position{gen: j.gen, off: uint32(j.off) + uint32(ends[k])},
			id: ids[k], data: buf[start+recordHeader : ends[k] : ends[k]]}
	}
	j.off += int64(len(buf))
	j.writes++
	j.rmu.Lock()
	j.recs = append(j.recs, recs...)
	for _, r := range recs {
		j.ids[r.id] = struct{}{}
	}
	j.last = recs[len(recs)-1].end
	j.rmu.Unlock()
}

// write writes buf at the journal's offset and syncs it.
func (j *intake) write(buf []byte) error {
	if _, err := j.f.WriteAt(buf, j.off); err != nil {
		return fmt.Errorf("write intake journal: %w", err)
	}
	if err := j.syncData(j.f); err != nil {
		return fmt.Errorf("sync intake journal: %w", err)
	}
	return nil
}

// fresh sets which of each acceptance's events are not waiting already, and returns the
// committed position.
func (j *intake) fresh(ctx context.Context, db *DB, group []*acceptance) (position, error) {
	n := 0
	for _, a := range group {
		a.added = make([]bool, len(a.evs))
		n += len(a.evs)
	}
	var seen map[string]struct{}
	if n > 1 {
		seen = make(map[string]struct{}, n)
	}
	var stored position
	err := db.do(ctx, false, func(t *tx) error {
		inbox, err := t.bucket(bucketInbox)
		if err != nil {
			return err
		}
		j.rmu.Lock()
		defer j.rmu.Unlock()
		stored = storedPosition(t.btx, j.id)
		// One cursor for the batch: bbolt's Get makes one for each key.
		c := inbox.Cursor()
		var key []byte
		for _, a := range group {
			for i, ev := range a.evs {
				if ev.ID == "" {
					return errors.New("an event without an ID")
				}
				_, journaled := j.ids[ev.ID]
				_, twice := seen[ev.ID]
				key = append(key[:0], ev.ID...)
				k, _ := c.Seek(key)
				a.added[i] = !journaled && !twice && !bytes.Equal(k, key)
				if seen != nil {
					seen[ev.ID] = struct{}{}
				}
			}
		}
		return nil
	})
	return stored, err
}

// acceptInTx makes group's events durable in one bbolt transaction, as AddInbox adds each.
func (db *DB) acceptInTx(ctx context.Context, group []*acceptance) {
	err := db.UpdateFirst(ctx, func(tx bot.Tx) error {
		for _, a := range group {
			a.added = make([]bool, len(a.evs))
			e := bot.InboxEntry{Replica: a.replica}
			for i, ev := range a.evs {
				e.Seq, e.Event = a.seq+int64(i), ev
				var err error
				if a.added[i], err = tx.AddInbox(&e); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, a := range group {
			a.added, a.err = nil, err
		}
	}
}

func (j *intake) lastPos() position {
	j.rmu.Lock()
	defer j.rmu.Unlock()
	return j.last
}

// turn starts a new generation, once everything written has been moved (to stored): the
// records of the generation before the one just moved are let go.
func (j *intake) turn(stored position) {
	j.rmu.Lock()
	keep := make([]intakeRecord, 0, len(j.recs))
	for _, r := range j.recs {
		if r.end.gen == j.gen {
			keep = append(keep, r)
		} else {
			delete(j.ids, r.id)
		}
	}
	j.recs, j.base = keep, j.turned
	j.rmu.Unlock()
	j.turned = stored
	j.gen, j.off = nextGen(j.gen), intakeHeader
}

// moveIntake moves into the inbox the journaled entries the stored position has not reached,
// and stores the position of the last: every write transaction that touches the inbox does
// it first, so that it sees every accepted event.
func (t *tx) moveIntake() error {
	j := t.db.intake
	if j == nil || j.skipMove.Load() {
		return nil
	}
	j.rmu.Lock()
	id, recs, last := j.id, j.recs, j.last
	j.rmu.Unlock()
	if last.gen == 0 {
		return nil
	}
	if _, err := t.bucket(bucketMeta); err != nil {
		return fmt.Errorf("move intake journal: %w", err)
	}
	stored := storedPosition(t.btx, id)
	if !last.after(stored) {
		return nil
	}
	inbox, err := t.bucket(bucketInbox)
	if err != nil {
		return fmt.Errorf("move intake journal: %w", err)
	}
	t.wrote = true
	// An event is journaled only when it is neither in the inbox nor journaled already, so
	// each record is put as it is.
	for _, r := range recs {
		if !r.end.after(stored) {
			continue
		}
		if err := inbox.Put([]byte(r.id), r.data); err != nil {
			return fmt.Errorf("move inbox entry %s: %w", r.id, err)
		}
	}
	return putPosition(t.btx, id, last)
}

// errIntakeSnapshot is Inbox's error in a read transaction older than the journaled
// records the store still keeps: it would miss entries moved since it began.
var errIntakeSnapshot = errors.New("the read transaction began before the intake journal's entries it keeps: read the inbox again")

// journaled returns the entries of the journal the read transaction t does not see in the
// inbox: those written after its stored position.
func (t *tx) journaled() ([]*bot.InboxEntry, error) {
	j := t.db.intake
	if j == nil {
		return nil, nil
	}
	j.rmu.Lock()
	id, recs, base, last := j.id, j.recs, j.base, j.last
	j.rmu.Unlock()
	stored := storedPosition(t.btx, id)
	if !last.after(stored) {
		return nil, nil
	}
	if base.after(stored) {
		return nil, errIntakeSnapshot
	}
	var out []*bot.InboxEntry
	for _, r := range recs {
		if !r.end.after(stored) {
			continue
		}
		e, err := decode[bot.InboxEntry](r.data, "inbox entry "+r.id)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// close moves what the journal holds into the inbox and closes it; the database's file is
// still open.
func (j *intake) close(db *DB) error {
	j.stop()
	<-j.made
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.closed = true
	// Moved also when the journal failed a write: what it held before is still to move.
	err := db.do(context.Background(), true, func(t *tx) error { return t.moveIntake() })
	if j.f != nil {
		if cerr := j.f.Close(); cerr != nil && err == nil {
			err = cerr
		}
		j.f = nil
	}
	if err != nil {
		return fmt.Errorf("close intake journal: %w", err)
	}
	return nil
}
