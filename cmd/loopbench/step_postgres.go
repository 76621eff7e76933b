package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/loopbot/loopbot/store/postgres"
)

// stepPostgres is the step scenario on PostgreSQL: the same runs, checkpointed to the
// database of -database-url (or LOOPBOT_DATABASE_URL), so that the two backends' step costs
// and checkpoint sizes sit side by side. What a checkpoint writes is measured as the growth
// of the server's write-ahead log, which counts every database of the server: measure on a
// server nothing else writes to. Without a URL the scenario says so and measures nothing.
func stepPostgres(ctx context.Context, o options) ([]figure, error) {
	url := o.databaseURL
	if url == "" {
		url = os.Getenv("LOOPBOT_DATABASE_URL")
	}
	if url == "" {
		fmt.Fprintln(os.Stderr, "loopbench: step-postgres: no -database-url or LOOPBOT_DATABASE_URL, nothing measured")
		return nil, nil
	}
	db, err := postgres.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	before, err := db.WALBytes(ctx)
	if err != nil {
		return nil, err
	}
	// Run IDs of their own, so that a database measured before holds no run of this one.
	prefix := fmt.Sprintf("step-pg-%d", time.Now().UnixNano())
	durations, checkpoints, outputLen, err := runSteps(ctx, o, db, prefix)
	if err != nil {
		return nil, err
	}
	after, err := db.WALBytes(ctx)
	if err != nil {
		return nil, err
	}
	return []figure{{
		Key:   "step_overhead_us_postgres",
		Value: float64(median(durations).Nanoseconds()) / 1e3,
		Unit:  "µs",
		Note: fmt.Sprintf("as step_overhead_us, checkpoints to PostgreSQL at %s: median of %d steps (%d runs of %d tool steps)",
			db.URL(), len(durations), o.stepRuns, o.stepSteps+1),
	}, {
		Key:   "checkpoint_bytes_per_step_postgres",
		Value: float64(after-before) / float64(checkpoints),
		Unit:  "B",
		Note: fmt.Sprintf("bytes of write-ahead log the server wrote over the %d checkpoints of those runs, each tool output %d bytes",
			checkpoints, outputLen),
	}}, nil
}
