package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestLeaseLiveMatchesTheDecodedLease checks that telling a stored lease live from its bytes
// agrees with decoding it, whatever its owner's name holds, and that bytes it cannot read
// are left to the decoder.
func TestLeaseLiveMatchesTheDecodedLease(t *testing.T) {
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	east := time.FixedZone("east", 5*3600)
	leases := []bot.Lease{
		{RunID: "run-1", Owner: "replica-a", Epoch: 3, Expires: now.Add(time.Minute)},
		{RunID: "run-2", Owner: "replica-a", Epoch: 3, Expires: now.Add(-time.Nanosecond)},
		{RunID: "run-3", Owner: "replica-a", Epoch: 3, Expires: now},
		{RunID: "run-4", Owner: "", Epoch: 4, Expires: now.Add(time.Hour)},
		{RunID: "run-5", Owner: `x","expires":"2099-01-01T00:00:00Z`, Epoch: 1, Expires: now.Add(-time.Hour)},
		{RunID: "run-6", Owner: `"owner":""`, Epoch: 1, Expires: now.Add(time.Hour)},
		{RunID: `"expires":"2000-01-01T00:00:00Z"`, Owner: "r", Epoch: 1, Expires: now.Add(time.Second)},
		{RunID: "run-8", Owner: "r", Epoch: 1, Expires: now.Add(1500 * time.Millisecond).In(east)},
		{RunID: "run-9", Owner: "r", Epoch: 1},
	}
	for _, l := range leases {
		data, err := json.Marshal(&l)
		if err != nil {
			t.Fatal(err)
		}
		live, ok := leaseLive(data, now)
		if !ok || live != l.Live(now) {
			t.Errorf("leaseLive(%s) = %v, %v; want %v, true", data, live, ok, l.Live(now))
		}
	}
	for _, data := range []string{``, `{}`, `{"owner":"x"}`, `{"owner":"x","expires":"soon"}`, `{"owner":"x","expires":"2026-11-27T07:00:00Z`, `{"owner":"`} {
		if _, ok := leaseLive([]byte(data), now); ok {
			t.Errorf("leaseLive(%s) told, want it left to the decoder", data)
		}
	}
}
