package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A damaged file.
//
// bbolt reads the file through a memory map. A page past the end of a truncated file is a
// SIGBUS when touched, and a page of garbage trips bbolt's assertions (panics); either one
// ends the process wherever it happens, in the middle of serving. So Open first opens an
// existing file read-only and checks it in a goroutine of its own whose memory faults are
// panics (debug.SetPanicOnFault), and turns any panic there into an error naming the file:
// a file that passes is one bbolt can read everywhere, and a file that fails never reaches
// the bot.

// ErrDamaged is wrapped by the error of Open and CheckFile when the file is not a sound
// bbolt database: cut short, a page overwritten, its metadata unreadable.
var ErrDamaged = errors.New("database file is damaged")

// maxProblems bounds what a check reports: one broken page can make thousands of findings.
const maxProblems = 20

// damaged is the error for a file that failed the check at open, saying what to do.
func damaged(path string, problems []error) error {
	what := problems[0].Error()
	if len(problems) > 1 {
		what += fmt.Sprintf(" (and %d more)", len(problems)-1)
	}
	return fmt.Errorf("%w: %s: %s; loopbot will not run on it: keep a copy of the file, then restore it from a backup "+
		"or move it aside to start with an empty database (`loopbot db check` lists what is wrong)", ErrDamaged, path, what)
}

// guard runs fn with memory faults turned into panics, and any panic into an error, so a
// fault while reading the mapped file is an error for the caller instead of the end of the
// process. It covers only the calling goroutine.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file failed: %v", r)
		}
	}()
	return fn()
}

// openReadOnly opens path read-only with bbolt's shared lock, under guard. With
// freelist, bbolt reads the free list while it opens, and that page may be the broken one;
// on a fault there bbolt never returns its DB, so the file it opened is kept here to be let
// go of (unlockAndClose). Its memory map stays, as nothing can unmap it: a failed open costs
// its address space until the process ends.
func openReadOnly(path string, lockTimeout time.Duration, freelist bool) (*bolt.DB, error) {
	var file *os.File
	var bdb *bolt.DB
	err := guard(func() error {
		var err error
		bdb, err = bolt.Open(path, 0o600, &bolt.Options{
			ReadOnly: true, Timeout: lockTimeout, PreLoadFreelist: freelist,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				file = f
				return f, err
			},
		})
		return err
	})
	switch {
	case err == nil:
		return bdb, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if file != nil {
		// bbolt closes the file itself when it returns an error, but not when it panics.
		unlockAndClose(file)
	}
	// bbolt's refusals (not a bbolt file, bad checksum, bad version) and faults alike.
	return nil, damaged(path, []error{err})
}

// verifyFile checks the structure of the existing file at path, read-only, before Open
// opens it for writing. A missing or empty file passes: bbolt creates one.
func verifyFile(path string, lockTimeout time.Duration) error {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if info.Size() == 0 {
		return nil
	}
	// First without the free list, whose page may lie past the end of a file cut short:
	// the length is checked from the metadata alone.
	if err := inspect(path, lockTimeout, false, func(btx *bolt.Tx) []error { return length(btx, info.Size()) }); err != nil {
		return err
	}
	return inspect(path, lockTimeout, true, func(btx *bolt.Tx) []error { return structure(btx, info.Size()) })
}

// inspect opens path read-only and runs check in a read transaction, under guard.
func inspect(path string, lockTimeout time.Duration, freelist bool, check func(btx *bolt.Tx) []error) error {
	bdb, err := openReadOnly(path, lockTimeout, freelist)
	if err != nil {
		return err
	}
	defer bdb.Close()
	var problems []error
	err = guard(func() error {
		return bdb.View(func(btx *bolt.Tx) error {
			problems = check(btx)
			return nil
		})
	})
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return damaged(path, problems)
	}
	return nil
}

// length checks that the file holds every page its metadata counts.
func length(btx *bolt.Tx, fileSize int64) []error {
	if btx.Size() > fileSize {
		return []error{fmt.Errorf("the file is %d bytes, but its pages reach %d bytes: it was cut short", fileSize, btx.Size())}
	}
	return nil
}

// structure checks that btx's pages lie within the file (in a database opened for writing
// the free list is loaded by then, and it lies within them), reads every key and value in
// this goroutine, which must be under guard, and then runs bbolt's own check, which reads in a
// goroutine of its own where a fault could not be caught: by then every page it reads has
// been read once already. It returns at most maxProblems findings.
func structure(btx *bolt.Tx, fileSize int64) []error {
	if problems := length(btx, fileSize); len(problems) > 0 {
		return problems
	}
	var sum uint32
	_ = btx.ForEach(func(_ []byte, b *bolt.Bucket) error {
		sum = touch(b, sum)
		return nil
	})
	var problems []error
	// The channel must be drained to the end: the checker's goroutine holds the
	// transaction until it has sent every error.
	for err := range btx.Check() {
		if len(problems) < maxProblems {
			problems = append(problems, err)
		}
	}
	return problems
}

// touch reads every key and value of b and its nested buckets; the checksum is only there
// so that the reads happen.
func touch(b *bolt.Bucket, sum uint32) uint32 {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sum = crc32.Update(sum, crc32.IEEETable, k)
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				sum = touch(nested, sum)
			}
			continue
		}
		sum = crc32.Update(sum, crc32.IEEETable, v)
	}
	return sum
}
