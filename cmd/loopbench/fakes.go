package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/adapters/slack"
	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// benchThread is where every scenario's runs live.
var benchThread = bot.ThreadRef{Platform: "bench", Channel: "C1", Thread: "T1"}

var benchUser = bot.User{ID: "U1", Name: "bench"}

// instantTool answers every call at once with the same output, so a scenario measures the
// loop and what surrounds it, not the tool.
type instantTool struct {
	name   string
	output string
}

var _ agent.Tool = instantTool{}

func (t instantTool) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        t.name,
			Description: "Returns a fixed text for any n.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		},
		Idempotent: true,
		Timeout:    time.Minute,
	}
}

func (t instantTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "returns a fixed text"}
}

func (t instantTool) Call(context.Context, agent.Invocation) (string, error) {
	return t.output, nil
}

// modelFunc is an in-process agent.Model, for scenarios that leave HTTP out.
type modelFunc func(ctx context.Context, req agent.Request) (agent.Reply, error)

func (f modelFunc) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	return f(ctx, req)
}

// median returns the middle of ds (the mean of the two middle values for an even count);
// ds is sorted in place.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	m := len(ds) / 2
	if len(ds)%2 == 1 {
		return ds[m]
	}
	return (ds[m-1] + ds[m]) / 2
}

// tempStore opens the real bbolt store in a fresh temporary directory, with its intake
// journal as loopbot opens it; closeStore closes it and removes the directory.
func tempStore(prefix string) (db *store.DB, closeStore func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	db, err = store.Open(filepath.Join(dir, "bench.db"), store.WithIntake())
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }, nil
}

// slackBot is the real bot behind the real Slack adapter in Socket Mode, against the fake
// Slack of adapters/slack/slackfake, as a loopbot process with Slack configured runs it.
type slackBot struct {
	fake slackEnd
	bot  *bot.Bot
	// handled receives, for every event the adapter hands over, what the bot made of it.
	handled chan handledEvent

	stopRun context.CancelFunc
	runDone chan error
	h       *reportingHandler
}

// handledEvent is the outcome of one bot.Handle call.
type handledEvent struct {
	ev  bot.Event
	res bot.Result
	err error
}

// reportingHandler is the bot as the adapter sees it (Handle and Accept), reporting each
// Handle's outcome and counting the Accept calls: one transaction, one disk sync, each.
type reportingHandler struct {
	b       *bot.Bot
	handled chan<- handledEvent
	accepts atomic.Int64
}

func (h *reportingHandler) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	res, err := h.b.Handle(ctx, ev)
	select {
	case h.handled <- handledEvent{ev: ev, res: res, err: err}:
	default:
	}
	return res, err
}

func (h *reportingHandler) Accept(ctx context.Context, evs []bot.Event) ([]bool, error) {
	h.accepts.Add(1)
	return h.b.Accept(ctx, evs)
}

// startSlackBot starts a bot on db with ag and cfg, and the Slack adapter in front of it
// talking to fake, and returns once the adapter's Socket Mode connection is up; it closes
// fake when it fails, and stop does. expect sizes the handled channel: more events than that
// are handled but not reported.
func startSlackBot(ctx context.Context, fake slackEnd, db *store.DB, ag *agent.Agent, cfg bot.Config, expect int) (*slackBot, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := slack.New(slack.Config{BotToken: "xoxb-bench", AppToken: "xapp-1-bench", APIURL: fake.APIURL()}, slack.WithLogger(logger))
	if err != nil {
		fake.close()
		return nil, fmt.Errorf("slack adapter: %w", err)
	}
	b, err := bot.New(cfg, db, ag, []bot.Platform{a}, bot.WithLogger(logger))
	if err != nil {
		fake.close()
		return nil, fmt.Errorf("new bot: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		fake.close()
		return nil, fmt.Errorf("start bot: %w", err)
	}
	s := &slackBot{fake: fake, bot: b, handled: make(chan handledEvent, expect), runDone: make(chan error, 1)}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	s.stopRun = stopRun
	h := &reportingHandler{b: b, handled: s.handled}
	s.h = h
	go func() { s.runDone <- a.Run(runCtx, h) }()
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fake.WaitConnections(waitCtx, 1); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop ends it as a loopbot process does: the adapter stops receiving, then the bot stops
// (runs save their state, the outbox is flushed to the fake), then the fake closes.
func (s *slackBot) stop() error {
	s.stopRun()
	runErr := <-s.runDone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopErr := s.bot.Stop(ctx)
	closeErr := s.fake.close()
	if runErr != nil {
		runErr = fmt.Errorf("slack adapter: %w", runErr)
	}
	return errors.Join(runErr, stopErr, closeErr)
}

// mention is the Socket Mode payload of an app_mention of the bot at the root of channel.
func mention(eventID, channel, ts, goal string) map[string]any {
	return slackfake.MentionCallback(eventID, channel, ts, "", "<@"+slackfake.BotUserID+"> "+goal)
}

// noProgressOff turns the loop's no-progress pause off in the scenarios whose instant tool
// answers the same every time: they measure the loop's cost, not its stuck rules, which
// would otherwise pause every run after ten steps.
const noProgressOff = -1
