//go:build !linux

package store

import "os"

// fdatasync is f.Sync where the system has no fdatasync of its own.
func fdatasync(f *os.File) error { return f.Sync() }
