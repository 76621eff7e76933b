package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres"
)

// makespanReplicas is the makespan scenario on replicas (three unless -replicas says)
// sharing the PostgreSQL database of -database-url (or LOOPBOT_DATABASE_URL): bots in this
// process, each with its own connection pool, agent and model client, as processes on one
// machine would be, taking the mentions in turn. The runs go to whichever replica claims them; one of
// them, elected, sends every answer. Without a URL the scenario says so and measures
// nothing.
func makespanReplicas(ctx context.Context, o options) ([]figure, error) {
	url := o.databaseURL
	if url == "" {
		url = os.Getenv("LOOPBOT_DATABASE_URL")
	}
	if url == "" {
		fmt.Fprintln(os.Stderr, "loopbench: makespan-replicas: no -database-url or LOOPBOT_DATABASE_URL, nothing measured")
		return nil, nil
	}
	steps := o.makespanSteps
	model, err := startModelProcess(ctx, o.makespanModel, steps, o.makespanLatency)
	if err != nil {
		return nil, err
	}
	defer model.stop()

	plat := &answerWatch{answered: make(chan struct{}, o.makespanRuns)}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var bots []*bot.Bot
	var first *postgres.DB
	for i := range o.replicas {
		db, err := postgres.Open(ctx, url)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		if first == nil {
			first = db
		}
		client, err := llm.New(llm.Config{BaseURL: model.url, Model: "m", MaxRetries: -1})
		if err != nil {
			return nil, fmt.Errorf("model client: %w", err)
		}
		ag, err := agent.New(agent.Config{MaxSteps: steps + 10, NoProgressSteps: noProgressOff}, client, []agent.Tool{instantTool{name: "look", output: "a short result"}})
		if err != nil {
			return nil, fmt.Errorf("new agent: %w", err)
		}
		cfg := bot.Config{MaxConcurrentRuns: o.makespanRuns, ReplicaID: fmt.Sprintf("bench-%d", i+1)}
		b, err := bot.New(cfg, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
		if err != nil {
			return nil, fmt.Errorf("new bot: %w", err)
		}
		if err := b.Start(ctx); err != nil {
			return nil, fmt.Errorf("start bot: %w", err)
		}
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		defer b.Stop(stopCtx)
		bots = append(bots, b)
	}

	br, err := modelBurst(ctx, o, model, bots, plat, first)
	if err != nil {
		return nil, err
	}
	wall := br.last.Sub(br.start)
	ideal := time.Duration(steps) * o.makespanLatency
	return []figure{{
		Key: "makespan_ratio_replicas", Value: wall.Seconds() / ideal.Seconds(), Unit: "ratio",
		Note: fmt.Sprintf("as makespan_ratio, on %d replicas in this process sharing PostgreSQL at %s (a pool each): %d runs accepted in %s, last completed after %s, ideal %s",
			o.replicas, first.URL(), o.makespanRuns, br.accepted.Round(time.Millisecond), wall.Round(time.Millisecond), ideal),
	}}, nil
}
