package main

import (
	"testing"

	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestStepPostgres runs the step scenario on a database of the test cluster: both figures
// are there, and each checkpoint wrote something to the log but far less than the whole of
// a run's state many times over.
func TestStepPostgres(t *testing.T) {
	t.Setenv("LOOPBOT_DATABASE_URL", "")
	if got := figuresOf(t, "-scenarios=step-postgres", "-step-runs=1", "-step-steps=2"); len(got) != 0 {
		t.Errorf("without a URL the scenario reported %v, want nothing", got)
	}
	url := pgtest.URL(t)
	got := figuresOf(t, "-scenarios=step-postgres", "-step-runs=2", "-step-steps=10", "-database-url="+url)
	if us := got["step_overhead_us_postgres"]; us <= 0 {
		t.Errorf("step_overhead_us_postgres = %v, want a positive time", us)
	}
	if b := got["checkpoint_bytes_per_step_postgres"]; b <= 0 || b > 64<<10 {
		t.Errorf("checkpoint_bytes_per_step_postgres = %v, want some bytes, less than 64 KiB", b)
	}
}

// TestMakespanReplicasRunsSmall runs the makespan burst on two replicas sharing a database of
// the test cluster: every run completes, the model is asked each step once, and the ratio is
// reported.
func TestMakespanReplicasRunsSmall(t *testing.T) {
	url := pgtest.URL(t)
	got := figuresOf(t, "-scenarios=makespan-replicas", "-replicas=2", "-makespan-runs=6", "-makespan-steps=2", "-makespan-latency=1ms", "-database-url="+url)
	if r := got["makespan_ratio_replicas"]; r < 1 {
		t.Errorf("makespan_ratio_replicas = %v, want at least 1", r)
	}
}
