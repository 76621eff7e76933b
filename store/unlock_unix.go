//go:build unix

package store

import (
	"os"
	"syscall"
)

// unlockAndClose lets go of a file bbolt opened, locked and mapped before it panicked. The
// lock is released explicitly: an flock belongs to the open file, which bbolt's memory map
// keeps open after the descriptor is closed.
func unlockAndClose(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
