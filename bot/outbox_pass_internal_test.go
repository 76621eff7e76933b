package bot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// listedOutbox is a store whose outbox lists items and which does nothing else.
type listedOutbox struct {
	Store // nil: only View is used
	items []OutboxItem
}

type listedOutboxTx struct {
	Tx // nil: only Outbox is used
	s  *listedOutbox
}

func (tx listedOutboxTx) Outbox() ([]OutboxItem, error) { return tx.AppendOutbox(nil) }

func (tx listedOutboxTx) AppendOutbox(dst []OutboxItem) ([]OutboxItem, error) {
	return append(dst, tx.s.items...), nil
}

func (s *listedOutbox) View(_ context.Context, fn func(tx Tx) error) error {
	return fn(listedOutboxTx{s: s})
}

// nopPlatform is a platform the pass hands items for; it is never called.
type nopPlatform struct{ Platform }

// TestAPassQueuesOneItemAChannelAndForgetsIdleChannels reads an outbox of three items in
// one channel and one in each of two others: a pass queues each channel's oldest item only,
// keeps the pacing of the channels with items or still paced, keeps what a channel could
// not settle of an item still stored, and forgets a channel with nothing waiting.
func TestAPassQueuesOneItemAChannelAndForgetsIdleChannels(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	item := func(key, channel string, at int) OutboxItem {
		return OutboxItem{Key: key, Kind: OutboxNotice, Text: key, Thread: ThreadRef{Platform: "test", Channel: channel, Thread: "T1"}, CreatedAt: t0.Add(time.Duration(at) * time.Second)}
	}
	s := &listedOutbox{items: []OutboxItem{
		item("notice/c1-b", "C1", 2), item("notice/c2", "C2", 4), item("notice/c1-a", "C1", 1),
		item("notice/c1-c", "C1", 3), item("notice/c5", "C5", 5),
	}}
	d := newDispatcher(s, map[string]Platform{"test": nopPlatform{}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, time.Now)
	d.workers = 0 // the queue is left as the pass made it
	sent := &unsettled{ref: MessageRef{ID: "m1"}}
	d.channels = map[string]*channel{
		"test/C3": {},                                                      // nothing waits: forgotten
		"test/C4": {unsettled: map[string]*unsettled{"notice/gone": sent}}, // what it kept is gone: forgotten
		"test/C5": {unsettled: map[string]*unsettled{"notice/c5": sent}},   // still stored: kept
		"test/C6": {free: time.Now().Add(time.Hour)},                       // still paced: kept
	}
	d.pass(t.Context())
	var queued []string
	for _, j := range d.queue {
		queued = append(queued, j.it.Key)
	}
	if want := []string{"notice/c1-a", "notice/c2", "notice/c5"}; !slices.Equal(queued, want) {
		t.Errorf("the pass queued %v, want %v", queued, want)
	}
	var kept []string
	for key := range d.channels {
		kept = append(kept, key)
	}
	slices.Sort(kept)
	if want := []string{"test/C1", "test/C2", "test/C5", "test/C6"}; !slices.Equal(kept, want) {
		t.Errorf("channels kept %v, want %v", kept, want)
	}
	if ch := d.channels["test/C5"]; ch == nil || ch.unsettled["notice/c5"] != sent {
		t.Error("channel C5 forgot what it could not settle of an item still stored")
	}
	if ch := d.channels["test/C1"]; ch == nil || ch.waiting != 3 {
		t.Errorf("channel C1 counts %+v waiting, want 3", ch)
	}
}

// BenchmarkPass is one dispatcher pass over an outbox of 1000 status cards in 1000
// channels, 950 of them paced (edited less than a second ago), as while a thousand runs go:
// the items listed (from memory here), each channel's first told, the ready ones queued.
func BenchmarkPass(b *testing.B) {
	s := &listedOutbox{}
	d := newDispatcher(s, map[string]Platform{"test": nopPlatform{}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, time.Now)
	d.workers = 0
	t0 := time.Now()
	for i := range 1000 {
		channel := fmt.Sprintf("C%04d", i)
		s.items = append(s.items, OutboxItem{Key: "card/run-" + channel, Kind: OutboxCard, RunID: "run-" + channel,
			Thread: ThreadRef{Platform: "test", Channel: channel, Thread: "T1"}, CreatedAt: t0.Add(time.Duration(i*7919%1000) * time.Microsecond)})
		if i%20 != 0 {
			d.channel("test/" + channel).free = t0.Add(time.Hour)
		}
	}
	// Listed oldest first, as a store lists them.
	slices.SortFunc(s.items, func(a, b OutboxItem) int { return a.CreatedAt.Compare(b.CreatedAt) })
	b.ReportAllocs()
	for b.Loop() {
		if _, _, read := d.pass(b.Context()); read != 1000 {
			b.Fatalf("%d items read", read)
		}
	}
}
