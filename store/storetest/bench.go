package storetest

import (
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
	step := func(tx bot.Tx) error {
		r.State.Step++
		return tx.PutRun(r)
	}
	b.Run("Update", func(b *testing.B) {
		for b.Loop() {
			if err := s.Update(b.Context(), step); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UpdateFenced", func(b *testing.B) {
		for b.Loop() {
			if err := l.UpdateFenced(b.Context(), leases[0], step); err != nil {
				b.Fatal(err)
			}
		}
	})
}
