package store

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data without its times, which a write over written blocks leaves
// the only metadata changed: as bbolt syncs its file.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
