//go:build !unix

package main

import (
	"errors"
	"time"
)

// processCPU is the CPU time this process has used; only unix systems report it here.
func processCPU() (time.Duration, error) {
	return 0, errors.New("the process's CPU time is read only on unix systems")
}
