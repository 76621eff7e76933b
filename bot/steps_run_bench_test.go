package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// stepsModel answers at once: a call of look until the request holds steps-1 tool
// results, then the answer.
type stepsModel struct{ steps int }

func (m stepsModel) Complete(_ context.Context, req agent.Request) (agent.Reply, error) {
	results := 0
	for _, msg := range req.Messages {
		if msg.Role == agent.RoleTool {
			results++
		}
	}
	if results >= m.steps-1 {
		return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}}, nil
	}
	return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: fmt.Sprintf("c%d", results), Name: "look", Arguments: fmt.Sprintf(`{"n":%d}`, results)}}}}, nil
}

// lookTool answers every call at once; it is idempotent, as a read is.
type lookTool struct{}

func (lookTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "look", Description: "Returns a fixed text for any n.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		Idempotent: true, Timeout: time.Minute}
}

func (lookTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "returns a fixed text"}
}

func (lookTool) Call(context.Context, agent.Invocation) (string, error) { return "a short result", nil }

// answersPlatform tells done once it was asked to post n answers.
type answersPlatform struct {
	posts   atomic.Int64
	answers atomic.Int64
	n       int64
	done    chan struct{}
}

func (p *answersPlatform) Name() string { return "test" }

func (p *answersPlatform) Post(_ context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	if msg.Kind == bot.KindAnswer && p.answers.Add(1) == p.n {
		close(p.done)
	}
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", p.posts.Add(1))}, nil
}

func (p *answersPlatform) Update(context.Context, bot.MessageRef, bot.Message) error { return nil }

func (p *answersPlatform) Notify(context.Context, bot.ThreadRef, string, string) error { return nil }

// BenchmarkRunSteps is what the bot spends on a run of five steps (four calls of an
// idempotent tool and the answer) with a model that answers at once, b.N runs started
// together on a bbolt store, each in a channel of its own: the mention, the checkpoints,
// the step boundaries' reads, the lease, the status cards and the answer. Per run.
func BenchmarkRunSteps(b *testing.B) {
	const steps = 5
	db, err := store.Open(filepath.Join(b.TempDir(), "bot.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ag, err := agent.New(agent.Config{MaxSteps: steps + 10, NoProgressSteps: 1000}, stepsModel{steps: steps}, []agent.Tool{lookTool{}})
	if err != nil {
		b.Fatal(err)
	}
	plat := &answersPlatform{n: int64(b.N), done: make(chan struct{})}
	bt, err := bot.New(bot.Config{MaxConcurrentRuns: b.N}, db, ag, []bot.Platform{plat}, bot.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	if err := bt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer bt.Stop(context.Background())
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	handled := make(chan error, b.N)
	for i := range b.N {
		go func() {
			th := bot.ThreadRef{Platform: "test", Channel: fmt.Sprintf("C%d", i), Thread: "T1"}
			_, err := bt.Handle(ctx, bot.Event{Kind: bot.EventMention, ID: fmt.Sprintf("ev-%d", i), Thread: th,
				User: bot.User{ID: "U1", Name: "ann"}, Text: "look around", At: time.Now()})
			handled <- err
		}()
	}
	for range b.N {
		if err := <-handled; err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-plat.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d answers posted", plat.answers.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
