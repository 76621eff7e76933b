//go:build unix

package main

import (
	"fmt"
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, that this process has used since it started.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
