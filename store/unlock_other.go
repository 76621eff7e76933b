//go:build !unix

package store

import "os"

// unlockAndClose lets go of a file bbolt opened before it panicked.
func unlockAndClose(f *os.File) { _ = f.Close() }
