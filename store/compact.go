package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Compaction.
//
// bbolt never gives space back to the file system: pages freed by deleted records (sent
// outbox items, purged event claims) are reused, but the file keeps its largest size.
// Compact copies the records into a new file with bbolt's own compaction, which packs
// them, checks the copy, and puts it in place of the original, kept beside it as a backup.

// compactTxSize bounds the writes of one transaction of the copy, so that a large file is
// not copied in one transaction held in memory.
const compactTxSize = 64 << 20

// Compacted is what Compact did.
type Compacted struct {
	Before, After int64  // the file's size, in bytes
	Backup        string // where the original was kept
}

// BackupPath is where Compact keeps the original of the database at path.
func BackupPath(path string) string { return path + ".bak" }

// Compact replaces the database at path with a compacted copy and keeps the original at
// BackupPath(path). It refuses a damaged file (copy what cannot be read and the copy is
// damaged too: restore a backup instead), a file another process holds (ErrLocked), and a
// backup already there, which it never overwrites. It holds the file's lock until the copy
// is in place, so no loopbot starts on the original meanwhile.
func Compact(ctx context.Context, path string, opts ...Option) (*Compacted, error) {
	o, info, err := offline(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	backup := BackupPath(path)
	if _, err := os.Lstat(backup); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("compact: %s already exists: move it away first, it may be the only copy of an older database", backup)
	}
	if err := verifyFile(path, o.lockTimeout); err != nil {
		return nil, err
	}
	src, err := openReadOnly(path, o.lockTimeout, true)
	if err != nil {
		return nil, err
	}
	defer src.Close()

	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("compact: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmp)
		}
	}()
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: o.lockTimeout})
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	err = guard(func() error { return bolt.Compact(dst, src, compactTxSize) })
	if err := errors.Join(err, dst.Close()); err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	r, err := CheckFile(ctx, tmp, WithLockTimeout(o.lockTimeout))
	if err != nil {
		return nil, fmt.Errorf("compact: check the copy: %w", err)
	}
	if len(r.Problems) > 0 {
		return nil, fmt.Errorf("compact: the copy fails its check: %w", r.Problems[0])
	}
	// The original stays reachable at every moment: first under the backup's name too,
	// then the copy takes its name in one rename.
	if err := os.Link(path, backup); err != nil {
		return nil, fmt.Errorf("compact: keep the original: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	done = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return &Compacted{Before: info.Size(), After: r.Size, Backup: backup}, nil
}
