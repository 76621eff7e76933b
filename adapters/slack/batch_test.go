package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestBatch: deliveries added are taken together in order; the reader waits while maxBatch
// wait and goes on once the acker took them; closing hands back what was not taken and
// refuses more.
func TestBatch(t *testing.T) {
	ctx := t.Context()
	b := newBatch()
	for i := range maxBatch {
		n, ok := b.add(ctx, delivery{envelope: fmt.Sprint(i)})
		if !ok || n != i+1 {
			t.Fatalf("add %d: %d waiting, ok %v", i, n, ok)
		}
	}
	added := make(chan bool)
	go func() {
		_, ok := b.add(ctx, delivery{envelope: "over"})
		added <- ok
	}()
	select {
	case <-added:
		t.Fatal("a delivery was added to a full batch")
	case <-time.After(20 * time.Millisecond):
	}
	ds, ok := b.take(ctx, nil)
	if !ok || len(ds) != maxBatch || ds[0].envelope != "0" || ds[maxBatch-1].envelope != fmt.Sprint(maxBatch-1) {
		t.Fatalf("take: %d deliveries, ok %v", len(ds), ok)
	}
	if !<-added {
		t.Fatal("the waiting add failed once the batch was taken")
	}
	next, ok := b.take(ctx, ds)
	if !ok || len(next) != 1 || next[0].envelope != "over" {
		t.Fatalf("second take: %+v, ok %v", next, ok)
	}
	if ds[0].envelope != "" {
		t.Error("the spare slice handed back was not cleared")
	}
	if _, ok := b.add(ctx, delivery{envelope: "left"}); !ok {
		t.Fatal("add after take failed")
	}
	left := b.close()
	if len(left) != 1 || left[0].envelope != "left" {
		t.Fatalf("close returned %+v", left)
	}
	if _, ok := b.add(ctx, delivery{envelope: "late"}); ok {
		t.Error("a closed batch took a delivery")
	}
	if _, ok := b.take(ctx, nil); ok {
		t.Error("take on a closed, empty batch reported ok")
	}
}

// TestBatchTakeWaits: take waits for the first delivery, and ends with its context, even
// with deliveries waiting.
func TestBatchTakeWaits(t *testing.T) {
	b := newBatch()
	got := make(chan []delivery)
	go func() {
		ds, _ := b.take(t.Context(), nil)
		got <- ds
	}()
	if _, ok := b.add(t.Context(), delivery{envelope: "e"}); !ok {
		t.Fatal("add failed")
	}
	if ds := <-got; len(ds) != 1 {
		t.Fatalf("take returned %d deliveries", len(ds))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := b.take(ctx, nil); ok {
		t.Error("take on an empty batch with its context ended reported ok")
	}
	// Once Run's context has ended, what was decoded is not taken to be accepted: close
	// hands it back.
	if _, ok := b.add(t.Context(), delivery{envelope: "late"}); !ok {
		t.Fatal("add failed")
	}
	if ds, ok := b.take(ctx, nil); ok {
		t.Errorf("take with its context ended returned %d deliveries", len(ds))
	}
	if left := b.close(); len(left) != 1 {
		t.Errorf("close returned %d deliveries, want the one left", len(left))
	}
}

// TestQueueOrder: jobs come out in the order they went in while the queue's array is
// reused and its front compacted.
func TestQueueOrder(t *testing.T) {
	q := newQueue(1 << 20)
	put := func(id string) {
		if !q.reserve() {
			t.Fatalf("no room for %s", id)
		}
		q.commit(&job{ev: bot.Event{ID: id}})
	}
	want := 0
	get := func() {
		t.Helper()
		j, ok := q.take()
		if !ok || j.ev.ID != fmt.Sprint(want) {
			t.Fatalf("took %q, want %d", j.ev.ID, want)
		}
		want++
	}
	next := 0
	for round := range 50 {
		for range round%7 + 1 {
			put(fmt.Sprint(next))
			next++
		}
		for range round % 5 {
			if want < next {
				get()
			}
		}
	}
	for want < next {
		get()
	}
	if q.head != 0 || len(q.jobs) != 0 || cap(q.jobs) == 0 {
		t.Errorf("emptied queue: head %d, %d jobs, room for %d", q.head, len(q.jobs), cap(q.jobs))
	}
	// A burst larger than what a queue keeps: its array goes once it is handled.
	for range keptQueueJobs + 1 {
		put(fmt.Sprint(next))
		next++
	}
	for want < next {
		get()
	}
	if q.jobs != nil {
		t.Errorf("the queue kept room for %d jobs", cap(q.jobs))
	}
}

// TestAppendAck: an ack's JSON names the envelope, with the answer's payload when there is
// one, whatever the ID holds.
func TestAppendAck(t *testing.T) {
	for _, tc := range []ackFrame{
		{envelopeID: "1d4a3e5c-4b5a-4a44-9f4c-5c6f8e0b2b11"},
		{envelopeID: `quote" back\ <tag> & é ☃ ` + "\x01"},
		{envelopeID: "invalid \xff UTF-8"},
		{envelopeID: "e", payload: ephemeral("done & <dusted>")},
	} {
		b, err := appendAck([]byte("junk"), tc)
		if err != nil {
			t.Fatalf("%q: %v", tc.envelopeID, err)
		}
		var got struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(b[len("junk"):], &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want, _ := json.Marshal(tc.payload)
		if tc.payload == nil {
			want = nil
		}
		wantID := strings.ToValidUTF8(tc.envelopeID, "\uFFFD")
		if got.EnvelopeID != wantID || string(got.Payload) != string(want) {
			t.Errorf("%s: decoded %+v", b, got)
		}
	}
}
