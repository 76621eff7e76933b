package storetest

import (
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// testDedupeRace is one delivery arriving twenty times at once, as a platform's retries and
// replicas behind a load balancer can: exactly one claim is the first, from the Store and
// inside transactions alike.
func testDedupeRace(t *testing.T, su *suite) {
	s := su.open(t)
	firsts := make([]bool, 20)
	errs := race(20, func(i int) error {
		var err error
		if i%2 == 0 {
			firsts[i], err = s.ClaimEvent(t.Context(), "Ev1", t0, time.Minute)
			return err
		}
		return s.Update(t.Context(), func(tx bot.Tx) error {
			var err error
			firsts[i], err = tx.ClaimEvent("Ev1", t0, time.Minute)
			return err
		})
	})
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
		if firsts[i] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d claims were the first, want exactly 1", n)
	}
}
