package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Option adds what a backend can do beyond bot.Store to the suite.
type Option func(*suite)

// WithReopen lets the suite check that data outlives a restart. reopen must close s and
// return a store that reads the same data.
func WithReopen(reopen func(t *testing.T, s bot.Store) bot.Store) Option {
	return func(su *suite) { su.reopen = reopen }
}

// WithSecondHandle lets the suite open a second handle on the database of s, as a second
// replica would: it must be closed in t.Cleanup. A backend without it (one process owns the
// store) says why with WithoutSecondHandle, and the subtests that need two handles skip.
func WithSecondHandle(second func(t *testing.T, s bot.Store) bot.Store) Option {
	return func(su *suite) { su.second = second }
}

// WithoutSecondHandle says why the backend cannot open a second handle on one database.
func WithoutSecondHandle(why string) Option {
	return func(su *suite) { su.secondWhy = why }
}

type suite struct {
	open      func(t *testing.T) bot.Store
	reopen    func(t *testing.T, s bot.Store) bot.Store
	second    func(t *testing.T, s bot.Store) bot.Store
	secondWhy string
}

// Run runs the conformance suite. open must return a new, empty store for each subtest and
// arrange with t.Cleanup to close it; a backend that can check its own consistency does that
// in the same cleanup.
func Run(t *testing.T, open func(t *testing.T) bot.Store, opts ...Option) {
	su := &suite{open: open, secondWhy: "the backend gives no second handle (WithSecondHandle)"}
	for _, opt := range opts {
		opt(su)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, su *suite)
	}{
		{"RoundTrip", testRoundTrip},
		{"NotFound", testNotFound},
		{"GettersReturnCopies", testCopies},
		{"RunStatusFollowsState", testRunStatus},
		{"Runs", testRuns},
		{"RunsAfterStatusChanges", testRunsAfterStatusChanges},
		{"RunHeader", testRunHeader},
		{"StateChanges", testStateChanges},
		{"RecoveryListing", testRecovery},
		{"Approvals", testApprovals},
		{"Outbox", testOutbox},
		{"Feedback", testFeedback},
		{"Inbox", testInbox},
		{"AuditOrder", testAuditOrder},
		{"RejectsMissingKeys", testMissingKeys},
		{"ViewIsReadOnly", testViewReadOnly},
		{"ContextCancelled", testContextCancelled},
		{"Rollback", testRollback},
		{"RollbackOnPanic", testRollbackOnPanic},
		{"CASApproval", testCASApproval},
		{"CASConversationActive", testCASConversation},
		{"NoLostUpdates", testNoLostUpdates},
		{"CASCreate", testCASCreate},
		{"Dedupe", testDedupe},
		{"DedupeAfterReopen", testDedupeReopen},
		{"DedupeInTransaction", testDedupeInTx},
		{"DedupeRace", testDedupeRace},
		{"DurableAfterReopen", testDurable},
		{"Purge", testPurge},
		{"ChannelAutonomy", testChannelAutonomy},
		{"Grants", testGrants},
		{"Memory", testMemory},
		{"ClaimRuns", testClaimRuns},
		{"Fencing", testFencing},
		{"LeaseExpiry", testLeaseExpiry},
		{"ClaimsExclusive", testClaimsExclusive},
		{"TwoHandles", testTwoHandles},
		{"RunLease", testRunLease},
		{"UpdateFencedRelease", testUpdateFencedRelease},
		{"TakeLease", testTakeLease},
		{"Election", testElection},
		{"ElectionExclusive", testElectionExclusive},
		{"Holds", testHolds},
		{"OutboxMark", testOutboxMark},
		{"ConsoleView", testConsoleView},
		{"ConsoleViewFollower", testConsoleViewFollower},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, su) })
	}
}

// t0 is the suite's clock: every time is a fixed offset from it, so nothing sleeps.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var (
	threadA = bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1740830400.000100"}
	threadB = bot.ThreadRef{Platform: "discord", Channel: "G1", Thread: "TH9"}
)

func update(t testing.TB, s bot.Store, fn func(tx bot.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func view(t *testing.T, s bot.Store, fn func(tx bot.Tx) error) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// equal fails the test with both values as JSON when they differ.
func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, js(got), js(want))
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// newRun is a run as the bot makes it: a state from agent.NewState, with the pause a paused
// status needs.
func newRun(id string, thread bot.ThreadRef, status agent.Status, created time.Time) *bot.RunRecord {
	st := agent.NewState(id, "goal of "+id, nil, created)
	st.Status = status
	switch status {
	case agent.StatusAwaitingApproval:
		st.Pause = &agent.Pause{Kind: agent.PauseApproval, Reason: "a call needs approval"}
	case agent.StatusAwaitingInput:
		st.Pause = &agent.Pause{Kind: agent.PauseAskUser, Reason: "the model asked", Question: "Which branch?", CallID: "c1"}
	}
	return &bot.RunRecord{
		ID:        id,
		Thread:    thread,
		Requester: bot.User{ID: "U1", Name: "ada"},
		Status:    status,
		State:     st,
		CreatedAt: created,
		UpdatedAt: created,
	}
}

// fullRun is a run with every field of the record and of its state set, as after a few
// steps.
func fullRun(id string) *bot.RunRecord {
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "earlier goal"},
		{Role: agent.RoleAssistant, Content: "earlier answer"},
	}
	st := agent.NewState(id, "deploy the docs site", history, at(0))
	args := `{"path":"docs/index.md"}`
	st.Status = agent.StatusAwaitingApproval
	st.Messages = append(st.Messages,
		agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "read_file", Arguments: args}, {ID: "c2", Name: "shell", Arguments: `{"cmd":"make deploy"}`}}},
		agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Name: "read_file", Content: "# Docs\n\nhello, “world” <b>&</b>"},
	)
	st.Pinned = []string{"the site is at docs.example.com"}
	st.Plan = []agent.PlanItem{{Step: "read the docs", Status: agent.PlanDone}, {Step: "deploy", Status: agent.PlanInProgress}}
	st.Calls = []agent.CallRecord{
		{ID: "c1", Step: 1, Name: "read_file", Arguments: args, ArgsHash: agent.HashArgs("read_file", args), Risk: agent.RiskSafe,
			Status: agent.CallSucceeded, Output: "# Docs", Attempts: 1, StartedAt: at(time.Second), FinishedAt: at(2 * time.Second), Reported: true},
		{ID: "c2", Step: 1, Name: "shell", Arguments: `{"cmd":"make deploy"}`, ArgsHash: agent.HashArgs("shell", `{"cmd":"make deploy"}`),
			Risk: agent.RiskDangerous, RiskReason: "deploys", Status: agent.CallAwaitingApproval,
			Decision: &agent.Decision{Approved: false, By: "U2", Reason: "not yet", At: at(3 * time.Second)}},
	}
	st.Step = 1
	st.Usage = agent.Usage{PromptTokens: 1200, CompletionTokens: 80, CachedTokens: 1000, Cost: 0.00123, Calls: 1}
	st.Active = 2500 * time.Millisecond
	st.UpdatedAt = at(3 * time.Second)
	st.ConsecutiveFailures = 1
	st.ToolFailures = map[string]int{"shell": 1}
	st.RepeatedCall = agent.Streak{Key: "read_file", Count: 1}
	st.Summaries = map[string]string{"c1": "the docs index"}
	st.BudgetWarned, st.FinalAsked, st.LastSanityStep = true, true, 1
	st.Pause = &agent.Pause{Kind: agent.PauseApproval, Reason: "shell needs approval"}
	return &bot.RunRecord{
		ID:             id,
		Thread:         threadA,
		Requester:      bot.User{ID: "U1", Name: "ada"},
		Status:         st.Status,
		State:          st,
		Card:           bot.MessageRef{Thread: threadA, ID: "1740830401.000200"},
		CancelAction:   "act-cancel",
		ContinueAction: "act-continue",
		StopAction:     "act-stop",
		CreatedAt:      at(0),
		UpdatedAt:      at(3 * time.Second),
	}
}

func newApproval(id, runID string, status bot.ApprovalStatus, created time.Time) *bot.Approval {
	return &bot.Approval{
		ID:            id,
		RunID:         runID,
		CallID:        "c2",
		Tool:          "shell",
		ArgsHash:      agent.HashArgs("shell", `{"cmd":"make deploy"}`),
		Risk:          agent.RiskDangerous,
		Thread:        threadA,
		Requester:     bot.User{ID: "U1", Name: "ada"},
		ApproveAction: id + "-yes",
		RejectAction:  id + "-no",
		Status:        status,
		CreatedAt:     created,
		ExpiresAt:     created.Add(time.Hour),
	}
}

// errTaken is what a compare-and-set function returns when it lost.
var errTaken = errors.New("already taken")
