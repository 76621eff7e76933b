package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// roundTrip checks that a decoded value encodes to JSON that decodes to the same encoding:
// what the store reads back from its own writes is stable.
func roundTrip[T any](t *testing.T, v *T, what string) {
	t.Helper()
	b1, err := json.Marshal(v)
	if err != nil {
		// Some decodable values cannot be encoded, such as an approval without a risk level
		// (agent.Risk refuses to write 0). The store cannot have written those, so there is
		// no round trip to keep.
		return
	}
	v2, err := decode[T](b1, what)
	if err != nil {
		t.Fatalf("decode re-encoded %s %s: %v", what, b1, err)
	}
	b2, err := json.Marshal(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("%s changes on a round trip:\n%s\n%s", what, b1, b2)
	}
}

func FuzzDecodeRun(f *testing.F) {
	st := agent.NewState("run-1", "goal", []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, time.Unix(1740830400, 0))
	st.Calls = []agent.CallRecord{{ID: "c1", Name: "shell", Risk: agent.RiskConfirm, Status: agent.CallStarted}}
	st.ToolFailures = map[string]int{"shell": 2}
	seed, err := json.Marshal(&bot.RunRecord{ID: "run-1", Status: st.Status, State: st, Thread: bot.ThreadRef{Platform: "slack", Channel: "C", Thread: "1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`null`))
	f.Add([]byte(`{"status":"running","state":{"status":"queued","messages":[{"role":"tool"}]}}`))
	f.Add([]byte(`{"status":1}`))
	f.Add([]byte(`{"thread":{"platform":"web"},"STATUS":"failed","status":"completed"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decode[bot.RunRecord](data, "run")
		if err != nil {
			return
		}
		roundTrip(t, r, "run")
		// PutRun stores the record and, apart, its head: RunHeader must read from the head
		// what Run reads from the record.
		want := head(r)
		data, err = json.Marshal(&want)
		if err != nil {
			return
		}
		got, err := decode[bot.RunRecord](data, "run head")
		if err != nil {
			t.Fatalf("head of a decodable record does not decode: %v", err)
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("head changes on a round trip:\n%s\n%s", data, again)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(uint8(0), []byte(`{"thread":{"platform":"slack","channel":"C","thread":"1"},"runs":["a"],"queue":[{"at":"2025-03-01T12:00:00+01:00"}]}`))
	f.Add(uint8(1), []byte(`{"id":"ap","risk":"dangerous","status":"pending","decided_at":"2025-03-01T12:00:00.123456789Z"}`))
	f.Add(uint8(2), []byte(`{"id":"act","kind":"approve"}`))
	f.Add(uint8(3), []byte(`{"at":"1960-01-01T00:00:00Z","actor":{"id":"U1","bot":true}}`))
	f.Add(uint8(4), []byte(`{"key":"card/run-1","attempts":-3}`))
	f.Add(uint8(5), []byte(`{"expires_at":"2262-04-11T23:47:16.854775807Z"}`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		switch kind % 6 {
		case 0:
			if v, err := decode[bot.Conversation](data, "conversation"); err == nil {
				roundTrip(t, v, "conversation")
			}
		case 1:
			if v, err := decode[bot.Approval](data, "approval"); err == nil {
				roundTrip(t, v, "approval")
			}
		case 2:
			if v, err := decode[bot.Action](data, "action"); err == nil {
				roundTrip(t, v, "action")
			}
		case 3:
			if v, err := decode[bot.AuditEntry](data, "audit entry"); err == nil {
				roundTrip(t, v, "audit entry")
			}
		case 4:
			if v, err := decode[bot.OutboxItem](data, "outbox item"); err == nil {
				roundTrip(t, v, "outbox item")
			}
		case 5:
			if v, err := decode[claim](data, "claim"); err == nil {
				roundTrip(t, v, "claim")
			}
		}
	})
}

// FuzzTimeKeyOrder checks that time keys sort as the times do, across 1970 too.
func FuzzTimeKeyOrder(f *testing.F) {
	f.Add(int64(0), int64(-1))
	f.Add(int64(-1<<63), int64(1<<63-1))
	f.Add(int64(1740830400000000000), int64(1740830400000000001))
	f.Fuzz(func(t *testing.T, a, b int64) {
		ka, kb := timeKey(time.Unix(0, a)), timeKey(time.Unix(0, b))
		if got, want := bytes.Compare(ka, kb), cmp.Compare(a, b); got != want {
			t.Fatalf("keys of %d and %d compare %d, times compare %d", a, b, got, want)
		}
	})
}
