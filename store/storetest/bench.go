package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// BenchCheckpoint measures one checkpoint as the bot writes it after a step: the run's
// record with an agent state of about 50 KB (a long run's), put back in a transaction of
// its own, plain (Update) and fenced by the run's lease (UpdateFenced). s must be empty.
func BenchCheckpoint(b *testing.B, s bot.Store) {
	r := newRun("run-bench", threadA, agent.StatusRunning, t0)
	chunk := strings.Repeat("output of a tool, a line of it. ", 32) // 1 KiB
	for i := range 50 {
		role := agent.RoleAssistant
		if i%2 == 1 {
			role = agent.RoleUser
		}
		r.State.Messages = append(r.State.Messages, agent.Message{Role: role, Content: chunk})
	}
	update(b, s, func(tx bot.Tx) error { return tx.PutRun(r) })
	l, ok := s.(bot.Leaser)
	if !ok {
		b.Fatalf("%T does not implement bot.Leaser", s)
	}
	leases, err := l.ClaimRuns(b.Context(), "replica-1", 1, t0, time.Hour)
	if err != nil || len(leases) != 1 {
		b.Fatalf("claim: %v, %v", leases, err)
	}
	// A step adds a message of 1 KiB to the 50 KB, as a step adds its tool's output, and
	// the checkpoint writes the run; the conversation is trimmed back now and then so that
	// it stays about 50 KB however many steps the benchmark takes.
	step := func(tx bot.Tx) error {
		r.State.Step++
		if len(r.State.Messages) >= 60 {
			r.State.Messages = r.State.Messages[:50]
		}
		r.State.Messages = append(r.State.Messages, agent.Message{Role: agent.RoleTool, Content: fmt.Sprintf("step %d: %s", r.State.Step, chunk)})
		return tx.PutRun(r)
	}
	b.Run("Update", func(b *testing.B) {
		measure := written(b, s)
		for b.Loop() {
			if err := s.Update(b.Context(), step); err != nil {
				b.Fatal(err)
			}
		}
		measure()
	})
	b.Run("UpdateFenced", func(b *testing.B) {
		measure := written(b, s)
		for b.Loop() {
			if err := l.UpdateFenced(b.Context(), leases[0], step); err != nil {
				b.Fatal(err)
			}
		}
		measure()
	})
}

// written starts counting what the store writes, if it can say, and returns the function
// that reports it per operation as written_B/op: bbolt's pages (BytesWritten), PostgreSQL's
// write-ahead log (WALBytes).
func written(b *testing.B, s bot.Store) func() {
	var count func() (int64, error)
	switch w := s.(type) {
	case interface{ BytesWritten() int64 }:
		count = func() (int64, error) { return w.BytesWritten(), nil }
	case interface {
		WALBytes(ctx context.Context) (int64, error)
	}:
		count = func() (int64, error) { return w.WALBytes(context.Background()) }
	default:
		return func() {}
	}
	start, err := count()
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		end, err := count()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(end-start)/float64(b.N), "written_B/op")
	}
}
