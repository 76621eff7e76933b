package main

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// TestFaultSlackKill9RightAfterAcks sends a burst of mentions, each the root of its own
// thread, and SIGKILLs the daemon the moment the fake has read the last acknowledgement:
// most of the burst has not reached Handle yet. Slack will not deliver an acknowledged
// envelope again, so the restarted daemon must handle what the first had accepted: every
// acknowledged mention ends with exactly one run.
func TestFaultSlackKill9RightAfterAcks(t *testing.T) {
	const n = 30
	goals := make([]string, n)
	for i := range goals {
		goals[i] = fmt.Sprintf("burst goal %02d", i)
	}
	model := newGoalModel(t, "", false, goals...)
	sf := newSocketFault(t, model)
	p := sf.start(1)
	for i, g := range goals {
		sf.mention(fmt.Sprintf("env-%02d", i), fmt.Sprintf("Ev-burst-%02d", i), "C1", fmt.Sprintf("1700000000.%06d", i+1), g)
	}
	sf.wait("the acks of the burst", func() bool { return len(sf.fake.Acks()) >= n })
	p.kill()
	if un := sf.fake.Unacked(); len(un) != 0 {
		t.Fatalf("unacknowledged %v", un)
	}
	// What the first daemon took in before the kill, for the log of the test.
	before := len(sf.fake.CallsOf("chat.postMessage"))

	p = sf.start(2)
	for _, g := range goals {
		sf.waitAnswer(g)
	}
	p.terminate(25 * time.Second)
	replayed := "none"
	if m := regexp.MustCompile(`events accepted before the restart handled.*count=(\d+)`).FindStringSubmatch(sf.logs.String()); m != nil {
		replayed = m[1]
	}
	journaled := "none"
	if m := regexp.MustCompile(`intake journal: acknowledged events moved into the inbox.*count=(\d+)`).FindStringSubmatch(sf.logs.String()); m != nil {
		journaled = m[1]
	}
	t.Logf("posts before the kill: %d; events moved from the intake journal at the restart: %s; handled from the inbox: %s", before, journaled, replayed)

	// A run the kill cut off asks the model again after the restart (the agent's
	// recovery), so checkOnce's count of model requests does not apply; the invariants
	// say one run per acknowledged mention.
	runs := sf.check(goals...)
	checkCompleted(t, runs, n)
}
