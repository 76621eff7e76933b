//go:build race

package main

// raceEnabled is true when the test binary runs with the race detector, whose shadow memory
// is read through the kernel's shared zero page: those pages are present in the page map but
// not counted in VmRSS.
const raceEnabled = true
