package bot

import (
	"sync"
	"time"
)

// clock is the time of record: when runs, approvals, audit entries and outbox items were
// written, and when approvals expire. Every role stamps through the one clock, so that
// records written in the same instant still sort in the order they were written.
type clock struct {
	now func() time.Time

	mu   sync.Mutex
	last time.Time
}

// Now is the clock's time, for deadlines that need no ordering.
func (c *clock) Now() time.Time { return c.now() }

// stamp is the clock's time, made strictly later than the last stamp, so that records
// written in one instant (or under a frozen test clock) still sort in the order written.
func (c *clock) stamp() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now().UTC()
	if !t.After(c.last) {
		t = c.last.Add(time.Nanosecond)
	}
	c.last = t
	return t
}
