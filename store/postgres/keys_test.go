package postgres

import (
	"testing"
	"time"

	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestOddKeysRefused claims an event whose ID holds a NUL byte and one that is not UTF-8:
// each is an error, not a hang or a retry loop, and the store goes on working.
func TestOddKeysRefused(t *testing.T) {
	db, err := Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"ev\x00nul", "ev\xffbad"} {
		if _, err := db.ClaimEvent(t.Context(), id, now, time.Minute); err == nil {
			t.Errorf("claim of %q: no error", id)
		}
	}
	if first, err := db.ClaimEvent(t.Context(), "ev-ok", now, time.Minute); err != nil || !first {
		t.Errorf("claim after the refused ones = %v, %v", first, err)
	}
}
