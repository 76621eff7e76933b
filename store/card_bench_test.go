package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// cardRun is a run as the makespan scenario leaves it after its fourth tool call: four
// short calls, the goal, the loop's bookkeeping. Its record is about 1.2 KB and each call
// 360 bytes, as stored.
func cardRun() *bot.RunRecord {
	now := time.Date(2026, 11, 27, 8, 51, 4, 897188369, time.UTC)
	st := agent.NewState("33ltlk2tm2por1o77imdbqds2nih57al", "look around", nil, now)
	st.Status = agent.StatusRunning
	for i := range 4 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		id := fmt.Sprintf("call_%d", 6+4*i)
		st.Messages = append(st.Messages,
			agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: id, Name: "look", Arguments: args}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "look", Content: "a short result"})
		at := now.Add(time.Duration(i+1) * 200 * time.Millisecond)
		st.Calls = append(st.Calls, agent.CallRecord{ID: id, Step: i + 1, Name: "look", Arguments: args,
			ArgsHash: agent.HashArgs("look", args), Risk: agent.RiskSafe, RiskReason: "returns a fixed text",
			Status: agent.CallSucceeded, Output: "a short result", Attempts: 1, StartedAt: at, FinishedAt: at.Add(7 * time.Microsecond), Reported: true})
		st.Recent = append(st.Recent, "look\x00"+args)
	}
	st.Step = 4
	st.Usage = agent.Usage{PromptTokens: 1031, CompletionTokens: 4, Calls: 4}
	st.Active = 850 * time.Millisecond
	st.UpdatedAt = now.Add(time.Second)
	st.RepeatedCall = agent.Streak{Key: "look\x00{\"n\":3}", Count: 1}
	st.ProgressAt, st.Outputs = 1, []string{"4f55597e45631d2e"}
	st.Nonce, st.Autonomy, st.Momentum = "3ba08564e8bfa0b0", agent.Level("balanced"), agent.Momentum{Outcomes: "ssss"}
	thread := bot.ThreadRef{Platform: "bench", Channel: "C0", Thread: "T1795769464897080547"}
	return &bot.RunRecord{ID: st.RunID, Thread: thread, Requester: bot.User{ID: "U1", Name: "bench"}, State: st,
		Card: bot.MessageRef{Thread: thread, ID: "m1"}, CancelAction: "33ltlk2tm35agdudlnhosmrvak8dk3ao",
		PauseAction: "33ltlk2tm36744mpmjlgsaid1mf4qtnm", CreatedAt: now, UpdatedAt: now.Add(time.Second)}
}

// BenchmarkPutRunHead saves a posted card's reference on cardRun, as the dispatcher does
// after a card's first post, inside one write transaction (the commit left out).
func BenchmarkPutRunHead(b *testing.B) {
	db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
	r := cardRun()
	if err := db.Update(b.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
		b.Fatal(err)
	}
	err := db.Update(b.Context(), func(tx bot.Tx) error {
		h, err := tx.RunHeader(r.ID)
		if err != nil {
			return err
		}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n++
			h.Card.ID = fmt.Sprintf("m%d", n%8)
			if err := tx.PutRunHead(h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
