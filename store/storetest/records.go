package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testRoundTrip puts one of every record type with every field set and reads it back equal.
func testRoundTrip(t *testing.T, su *suite) {
	run := fullRun("run-1")
	conv := &bot.Conversation{
		Thread: threadA,
		Runs:   []string{"run-0", "run-1"},
		Active: "run-1",
		Queue:  []bot.QueuedGoal{{EventID: "Ev1", User: bot.User{ID: "U2", Name: "bob"}, Text: "and then?", At: at(time.Minute)}},
	}
	appr := newApproval("ap-1", "run-1", bot.ApprovalRejected, at(0))
	appr.DecidedBy, appr.DecidedAt, appr.Reason = bot.User{ID: "U2", Name: "bob"}, at(time.Minute), "not on a Friday"
	appr.Card = bot.MessageRef{Thread: threadA, ID: "1740830402.000300"}
	act := &bot.Action{ID: "ap-1-yes", Kind: bot.ActionApprove, RunID: "run-1", ApprovalID: "ap-1"}
	entry := bot.AuditEntry{At: at(time.Minute), Actor: bot.User{ID: "U2", Name: "bob"}, Action: "reject", RunID: "run-1",
		ApprovalID: "ap-1", CallID: "c2", Tool: "shell", ArgsHash: appr.ArgsHash, Detail: "not on a Friday"}
	item := bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", ApprovalID: "ap-1", Thread: threadA,
		Text: "hello", CreatedAt: at(time.Minute), Attempts: 2}

	s := su.open(t)
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(run), tx.PutConversation(conv), tx.PutApproval(appr), tx.PutAction(act),
			tx.AppendAudit(entry), tx.PutOutbox(item))
	})
	view(t, s, func(tx bot.Tx) error {
		gotRun, err := tx.Run("run-1")
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		equal(t, "run", gotRun, run)
		gotConv, err := tx.Conversation(threadA)
		if err != nil {
			t.Fatalf("Conversation: %v", err)
		}
		equal(t, "conversation", gotConv, conv)
		gotAppr, err := tx.Approval("ap-1")
		if err != nil {
			t.Fatalf("Approval: %v", err)
		}
		equal(t, "approval", gotAppr, appr)
		gotAct, err := tx.Action("ap-1-yes")
		if err != nil {
			t.Fatalf("Action: %v", err)
		}
		equal(t, "action", gotAct, act)
		gotAudit, err := tx.Audit("")
		if err != nil {
			t.Fatalf("Audit: %v", err)
		}
		equal(t, "audit", gotAudit, []bot.AuditEntry{entry})
		gotOutbox, err := tx.Outbox()
		if err != nil {
			t.Fatalf("Outbox: %v", err)
		}
		equal(t, "outbox", gotOutbox, []bot.OutboxItem{item})
		return nil
	})

	// The state must still be one the loop can resume.
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		if err := got.State.Validate(); err != nil {
			t.Errorf("stored state does not validate: %v", err)
		}
		return nil
	})
}

func testNotFound(t *testing.T, su *suite) {
	s := su.open(t)
	// One record of each kind exists, so a backend that ignores the key is caught too.
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(newRun("run-1", threadA, agent.StatusQueued, at(0))),
			tx.PutConversation(&bot.Conversation{Thread: threadA}),
			tx.PutApproval(newApproval("ap-1", "run-1", bot.ApprovalPending, at(0))),
			tx.PutAction(&bot.Action{ID: "act-1", Kind: bot.ActionCancel, RunID: "run-1"}))
	})
	tests := []struct {
		name string
		get  func(tx bot.Tx) (any, error)
	}{
		{"Run", func(tx bot.Tx) (any, error) { return tx.Run("run-2") }},
		{"RunHeader", func(tx bot.Tx) (any, error) { return tx.RunHeader("run-2") }},
		{"RunBrief", func(tx bot.Tx) (any, error) { return tx.RunBrief("run-2") }},
		{"Conversation", func(tx bot.Tx) (any, error) { return tx.Conversation(threadB) }},
		{"Approval", func(tx bot.Tx) (any, error) { return tx.Approval("ap-2") }},
		{"Action", func(tx bot.Tx) (any, error) { return tx.Action("act-2") }},
	}
	view(t, s, func(tx bot.Tx) error {
		for _, tt := range tests {
			got, err := tt.get(tx)
			if !errors.Is(err, bot.ErrNotFound) {
				t.Errorf("%s of a missing key: got %v, %v; want ErrNotFound", tt.name, js(got), err)
			}
		}
		return nil
	})
}

// testCopies changes what getters returned and checks the store did not change with it.
func testCopies(t *testing.T, su *suite) {
	s := su.open(t)
	want := fullRun("run-1")
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(want), tx.PutConversation(&bot.Conversation{Thread: threadA, Runs: []string{"run-1"}}))
	})
	view(t, s, func(tx bot.Tx) error {
		r, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		r.Status = agent.StatusFailed
		r.State.Messages[0].Content = "changed"
		r.State.ToolFailures["shell"] = 99
		c, err := tx.Conversation(threadA)
		if err != nil {
			return err
		}
		c.Runs[0] = "changed"
		h, err := tx.RunHeader("run-1")
		if err != nil {
			return err
		}
		h.Status, h.Card.ID = agent.StatusFailed, "changed"
		return nil
	})
	view(t, s, func(tx bot.Tx) error {
		r, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		equal(t, "run after changing a copy", r, fullRun("run-1"))
		h, err := tx.RunHeader("run-1")
		if err != nil {
			return err
		}
		equal(t, "run header after changing a copy", h, header(fullRun("run-1")))
		c, err := tx.Conversation(threadA)
		if err != nil {
			return err
		}
		equal(t, "conversation runs after changing a copy", c.Runs, []string{"run-1"})
		return nil
	})
}

// testRunStatus checks that a stored run's Status is its State's.
func testRunStatus(t *testing.T, su *suite) {
	tests := []struct {
		name   string
		record agent.Status
		state  agent.Status // "" for a run without a state
		want   agent.Status
	}{
		{"record status empty", "", agent.StatusRunning, agent.StatusRunning},
		{"record status stale", agent.StatusRunning, agent.StatusCompleted, agent.StatusCompleted},
		{"no state", agent.StatusQueued, "", agent.StatusQueued},
	}
	s := su.open(t)
	for i, tt := range tests {
		id := "run-" + string(rune('a'+i))
		r := newRun(id, threadA, agent.StatusQueued, at(0))
		r.Status = tt.record
		if tt.state == "" {
			r.State = nil
		} else {
			r.State.Status = tt.state
		}
		update(t, s, func(tx bot.Tx) error { return tx.PutRun(r) })
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.Run(id)
			if err != nil {
				return err
			}
			if got.Status != tt.want {
				t.Errorf("%s: stored status %q, want %q", tt.name, got.Status, tt.want)
			}
			if got.State != nil && got.State.Status != got.Status {
				t.Errorf("%s: stored status %q but state status %q", tt.name, got.Status, got.State.Status)
			}
			listed, err := tx.Runs(bot.RunFilter{Statuses: []agent.Status{tt.want}})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(listed, func(r *bot.RunRecord) bool { return r.ID == id }) {
				t.Errorf("%s: Runs filtered by %q does not list the run", tt.name, tt.want)
			}
			listedIDs, err := tx.RunIDs(bot.RunFilter{Statuses: []agent.Status{tt.want}})
			if err != nil {
				return err
			}
			if !slices.Contains(listedIDs, id) {
				t.Errorf("%s: RunIDs filtered by %q does not list the run", tt.name, tt.want)
			}
			h, err := tx.RunHeader(id)
			if err != nil {
				return err
			}
			if h.Status != tt.want {
				t.Errorf("%s: header status %q, want %q", tt.name, h.Status, tt.want)
			}
			return nil
		})
	}
}

// nonNil makes an empty list compare equal to []string{}.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// header is r as RunHeader returns it.
func header(r *bot.RunRecord) *bot.RunRecord {
	h := *r
	h.State = nil
	return &h
}

func ids(runs []*bot.RunRecord) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func testRuns(t *testing.T, su *suite) {
	s := su.open(t)
	// IDs do not sort in creation order, so a backend that lists by ID fails.
	runs := []*bot.RunRecord{
		newRun("run-3", threadA, agent.StatusCompleted, at(1*time.Second)),
		newRun("run-1", threadA, agent.StatusRunning, at(2*time.Second)),
		newRun("run-2", threadB, agent.StatusAwaitingApproval, at(3*time.Second)),
		newRun("run-5", threadB, agent.StatusQueued, at(4*time.Second)),
		newRun("run-4", threadA, agent.StatusFailed, at(5*time.Second)),
		newRun("run-0", threadA, agent.StatusAwaitingInput, at(6*time.Second)),
	}
	for _, r := range runs {
		update(t, s, func(tx bot.Tx) error { return tx.PutRun(r) })
	}
	// Updating the first run must not move it.
	first := newRun("run-3", threadA, agent.StatusCompleted, at(1*time.Second))
	first.UpdatedAt = at(time.Hour)
	update(t, s, func(tx bot.Tx) error { return tx.PutRun(first) })

	tests := []struct {
		name   string
		filter bot.RunFilter
		want   []string
	}{
		{"all", bot.RunFilter{}, []string{"run-3", "run-1", "run-2", "run-5", "run-4", "run-0"}},
		{"one status", bot.RunFilter{Statuses: []agent.Status{agent.StatusRunning}}, []string{"run-1"}},
		{"two statuses", bot.RunFilter{Statuses: []agent.Status{agent.StatusFailed, agent.StatusCompleted}}, []string{"run-3", "run-4"}},
		{"no match", bot.RunFilter{Statuses: []agent.Status{agent.StatusCancelled}}, []string{}},
		{"thread", bot.RunFilter{Thread: &threadA}, []string{"run-3", "run-1", "run-4", "run-0"}},
		{"thread and status", bot.RunFilter{Thread: &threadB, Statuses: []agent.Status{agent.StatusQueued}}, []string{"run-5"}},
		{"other thread", bot.RunFilter{Thread: &bot.ThreadRef{Platform: "web", Channel: "console", Thread: "1"}}, []string{}},
		{"limit", bot.RunFilter{Limit: 2}, []string{"run-3", "run-1"}},
		{"limit above count", bot.RunFilter{Limit: 10}, []string{"run-3", "run-1", "run-2", "run-5", "run-4", "run-0"}},
		{"thread and limit", bot.RunFilter{Thread: &threadA, Limit: 3}, []string{"run-3", "run-1", "run-4"}},
		{"statuses and limit", bot.RunFilter{Statuses: []agent.Status{agent.StatusAwaitingInput, agent.StatusQueued, agent.StatusRunning}, Limit: 2}, []string{"run-1", "run-5"}},
		{"status twice", bot.RunFilter{Statuses: []agent.Status{agent.StatusFailed, agent.StatusFailed}}, []string{"run-4"}},
		{"thread, statuses and limit", bot.RunFilter{Thread: &threadA, Statuses: []agent.Status{agent.StatusAwaitingInput, agent.StatusCompleted, agent.StatusAwaitingApproval}, Limit: 2}, []string{"run-3", "run-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view(t, s, func(tx bot.Tx) error {
				got, err := tx.Runs(tt.filter)
				if err != nil {
					return err
				}
				equal(t, "run IDs", ids(got), tt.want)
				gotIDs, err := tx.RunIDs(tt.filter)
				if err != nil {
					return err
				}
				equal(t, "RunIDs", nonNil(gotIDs), tt.want)
				return nil
			})
		})
	}
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Runs(bot.RunFilter{Limit: 1})
		if err != nil {
			return err
		}
		equal(t, "listed run is the whole record", got, []*bot.RunRecord{first})
		return nil
	})
}

// testRecovery lists what a restarted bot must pick up again: every run that is not over.
func testRecovery(t *testing.T, su *suite) {
	s := su.open(t)
	all := []agent.Status{
		agent.StatusCompleted, agent.StatusRunning, agent.StatusFailed, agent.StatusAwaitingApproval,
		agent.StatusCancelled, agent.StatusQueued, agent.StatusBudgetExhausted, agent.StatusAwaitingInput,
	}
	var want []string
	update(t, s, func(tx bot.Tx) error {
		for i, st := range all {
			id := "run-" + string(st)
			if !st.Terminal() {
				want = append(want, id)
			}
			if err := tx.PutRun(newRun(id, threadA, st, at(time.Duration(i)*time.Second))); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Runs(bot.RunFilter{Statuses: []agent.Status{
			agent.StatusRunning, agent.StatusQueued, agent.StatusAwaitingApproval, agent.StatusAwaitingInput}})
		if err != nil {
			return err
		}
		equal(t, "runs to recover", ids(got), want)
		for _, r := range got {
			if r.State == nil || r.State.Status.Terminal() {
				t.Errorf("run %s listed for recovery without a live state", r.ID)
			}
		}
		return nil
	})
}

// testRunsAfterStatusChanges moves runs through their lives the way the bot does, put again
// at every step, and checks after each move that listing by status finds each run under its
// latest status only, in creation order, whatever the order of the moves.
func testRunsAfterStatusChanges(t *testing.T, su *suite) {
	s := su.open(t)
	const (
		queued    = agent.StatusQueued
		running   = agent.StatusRunning
		approval  = agent.StatusAwaitingApproval
		input     = agent.StatusAwaitingInput
		completed = agent.StatusCompleted
		failed    = agent.StatusFailed
		cancelled = agent.StatusCancelled
	)
	everyStatus := []agent.Status{queued, running, approval, input, completed, failed, cancelled, agent.StatusBudgetExhausted}
	// IDs run against creation order, so listing by ID fails.
	created := []string{"run-e", "run-d", "run-c", "run-b", "run-a"}
	status := map[string]agent.Status{}
	moves := []struct {
		id string
		to agent.Status
	}{
		{"run-e", queued}, {"run-d", queued}, {"run-c", queued}, {"run-b", queued}, {"run-a", queued},
		{"run-c", running}, {"run-e", running}, {"run-c", running}, // again, with the status it has
		{"run-a", running}, {"run-e", approval}, {"run-c", completed}, {"run-e", running},
		{"run-b", cancelled}, {"run-a", input}, {"run-e", completed}, {"run-a", running},
		{"run-d", running}, {"run-a", failed}, {"run-d", completed},
	}
	// want lists the runs with one of statuses as a correct backend would.
	want := func(statuses []agent.Status, limit int) []string {
		out := []string{}
		for _, id := range created {
			if slices.Contains(statuses, status[id]) && (limit == 0 || len(out) < limit) {
				out = append(out, id)
			}
		}
		return out
	}
	filters := [][]agent.Status{{running, queued}, {completed, failed, cancelled}, {queued, running, approval, input}}
	for _, st := range everyStatus {
		filters = append(filters, []agent.Status{st})
	}
	for i, m := range moves {
		update(t, s, func(tx bot.Tx) error {
			r, err := tx.Run(m.id)
			if errors.Is(err, bot.ErrNotFound) {
				r = newRun(m.id, threadA, m.to, at(time.Duration(i)*time.Second))
			} else if err != nil {
				return err
			}
			r.State.Status, r.UpdatedAt = m.to, at(time.Duration(i)*time.Second)
			return tx.PutRun(r)
		})
		status[m.id] = m.to
		view(t, s, func(tx bot.Tx) error {
			for _, f := range filters {
				for _, limit := range []int{0, 1, 2} {
					filter := bot.RunFilter{Statuses: f, Limit: limit}
					got, err := tx.Runs(filter)
					if err != nil {
						return err
					}
					equal(t, fmt.Sprintf("after move %d (%s to %s), Runs of %v limit %d", i, m.id, m.to, f, limit), ids(got), want(f, limit))
					for _, r := range got {
						if r.Status != status[r.ID] || r.State.Status != status[r.ID] {
							t.Errorf("after move %d, Runs of %v gave run %s as %s with state %s, want %s", i, f, r.ID, r.Status, r.State.Status, status[r.ID])
						}
					}
					gotIDs, err := tx.RunIDs(filter)
					if err != nil {
						return err
					}
					equal(t, fmt.Sprintf("after move %d (%s to %s), RunIDs of %v limit %d", i, m.id, m.to, f, limit), nonNil(gotIDs), want(f, limit))
				}
			}
			return nil
		})
	}
	// The changes outlive a restart, as the index they may be kept in must.
	if su.reopen != nil {
		s = su.reopen(t, s)
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.RunIDs(bot.RunFilter{Statuses: []agent.Status{running, completed}})
			if err != nil {
				return err
			}
			equal(t, "RunIDs after reopen", nonNil(got), want([]agent.Status{running, completed}, 0))
			return nil
		})
	}
}

// testRunHeader checks that RunHeader is the run without its state, before and after the
// run's fields change.
func testRunHeader(t *testing.T, su *suite) {
	s := su.open(t)
	r := fullRun("run-1")
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(r), tx.PutRun(newRun("run-2", threadB, agent.StatusQueued, at(time.Second))))
	})
	check := func(what string) {
		t.Helper()
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.RunHeader("run-1")
			if err != nil {
				return err
			}
			equal(t, what, got, header(r))
			return nil
		})
	}
	check("header of a new run")
	r.State.Status, r.State.Pause, r.Status = agent.StatusCompleted, nil, agent.StatusCompleted
	r.Card.ID, r.ContinueAction, r.UpdatedAt = "1740830409.000900", "", at(time.Hour)
	update(t, s, func(tx bot.Tx) error { return tx.PutRun(r) })
	check("header after the run changed")
	// A head put with PutRunHead changes the run's other fields and keeps its state and
	// status, whatever the head says of them.
	h := header(r)
	h.Card.ID, h.CancelAction, h.UpdatedAt, h.Status = "1740830410.001000", "act-cancel-2", at(2*time.Hour), agent.StatusRunning
	update(t, s, func(tx bot.Tx) error { return tx.PutRunHead(h) })
	r.Card.ID, r.CancelAction, r.UpdatedAt = h.Card.ID, h.CancelAction, h.UpdatedAt
	check("header after PutRunHead")
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		equal(t, "run after PutRunHead", got, r)
		// The brief a card is rendered from carries the new head too: the card's
		// reference is read from it (bot's postedRef).
		brief, err := tx.RunBrief("run-1")
		if err != nil {
			return err
		}
		want := *r
		st := *r.State
		st.Messages = nil
		want.State = &st
		equal(t, "brief after PutRunHead", brief, &want)
		ids, err := tx.RunIDs(bot.RunFilter{Statuses: []agent.Status{agent.StatusCompleted}})
		equal(t, "completed runs after PutRunHead", ids, []string{"run-1"})
		return err
	})
	if err := s.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRunHead(r) }); err == nil {
		t.Error("PutRunHead of a record with a state: no error")
	}
	if err := s.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRunHead(header(newRun("run-9", threadB, agent.StatusQueued, at(0))))
	}); err == nil {
		t.Error("PutRunHead of a run never put: no error")
	}
	// A header put back is a run without a state, as bot.Tx warns.
	update(t, s, func(tx bot.Tx) error { return tx.PutRun(header(r)) })
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		equal(t, "run put back from its header", got, header(r))
		return nil
	})
}

func approvalIDs(as []*bot.Approval) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// testApprovals lists a run's approvals and all pending ones, oldest first.
func testApprovals(t *testing.T, su *suite) {
	s := su.open(t)
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(
			tx.PutApproval(newApproval("ap-a", "run-1", bot.ApprovalPending, at(3*time.Second))),
			tx.PutApproval(newApproval("ap-b", "run-1", bot.ApprovalApproved, at(1*time.Second))),
			tx.PutApproval(newApproval("ap-c", "run-2", bot.ApprovalPending, at(2*time.Second))),
			tx.PutApproval(newApproval("ap-d", "run-2", bot.ApprovalExpired, at(0))),
			tx.PutApproval(newApproval("ap-e", "run-3", bot.ApprovalCancelled, at(0))),
		)
	})
	tests := []struct {
		runID string
		want  []string
	}{
		{"run-1", []string{"ap-b", "ap-a"}},
		{"run-2", []string{"ap-d", "ap-c"}},
		{"run-3", []string{"ap-e"}},
		{"run-9", []string{}},
		{"", []string{"ap-c", "ap-a"}},
	}
	view(t, s, func(tx bot.Tx) error {
		for _, tt := range tests {
			got, err := tx.Approvals(tt.runID)
			if err != nil {
				return err
			}
			equal(t, "approvals of run "+tt.runID, approvalIDs(got), tt.want)
		}
		return nil
	})
}

func outboxKeys(items []bot.OutboxItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Key+"="+it.Text)
	}
	return out
}

// testOutbox checks that an item replaces the one with its key (how card edits coalesce),
// that items list oldest first, and that delete removes exactly one.
func testOutbox(t *testing.T, su *suite) {
	s := su.open(t)
	steps := []struct {
		name string
		fn   func(tx bot.Tx) error
		want []string
	}{
		{"empty", func(bot.Tx) error { return nil }, []string{}},
		{"put two", func(tx bot.Tx) error {
			return errors.Join(
				tx.PutOutbox(bot.OutboxItem{Key: "z/card", Kind: bot.OutboxCard, Thread: threadA, Text: "v1", CreatedAt: at(0)}),
				tx.PutOutbox(bot.OutboxItem{Key: "a/answer", Kind: bot.OutboxAnswer, Thread: threadA, Text: "done", CreatedAt: at(time.Second)}))
		}, []string{"z/card=v1", "a/answer=done"}},
		{"replace by key", func(tx bot.Tx) error {
			return tx.PutOutbox(bot.OutboxItem{Key: "z/card", Kind: bot.OutboxCard, Thread: threadA, Text: "v2", CreatedAt: at(0)})
		}, []string{"z/card=v2", "a/answer=done"}},
		{"delete one", func(tx bot.Tx) error { return tx.DeleteOutbox("z/card") }, []string{"a/answer=done"}},
		{"delete missing", func(tx bot.Tx) error { return tx.DeleteOutbox("z/card") }, []string{"a/answer=done"}},
		{"delete last", func(tx bot.Tx) error { return tx.DeleteOutbox("a/answer") }, []string{}},
	}
	for _, st := range steps {
		if err := s.Update(t.Context(), st.fn); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.Outbox()
			if err != nil {
				return err
			}
			equal(t, st.name, outboxKeys(got), st.want)
			return nil
		})
	}
}

// testAuditOrder appends entries out of time order, some with equal times, over two
// transactions, and expects time order with appends breaking ties.
func testAuditOrder(t *testing.T, su *suite) {
	s := su.open(t)
	entry := func(d time.Duration, runID, detail string) bot.AuditEntry {
		return bot.AuditEntry{At: at(d), Actor: bot.User{ID: "U1"}, Action: "approve", RunID: runID, Detail: detail}
	}
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.AppendAudit(entry(2*time.Second, "run-1", "b")), tx.AppendAudit(entry(0, "run-1", "a")))
	})
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.AppendAudit(entry(2*time.Second, "run-1", "c")), tx.AppendAudit(entry(time.Second, "run-2", "d")),
			tx.AppendAudit(entry(2*time.Second, "run-2", "e")))
	})
	details := func(es []bot.AuditEntry) []string {
		out := []string{}
		for _, e := range es {
			out = append(out, e.Detail)
		}
		return out
	}
	tests := []struct {
		runID string
		want  []string
	}{
		{"", []string{"a", "d", "b", "c", "e"}},
		{"run-1", []string{"a", "b", "c"}},
		{"run-2", []string{"d", "e"}},
		{"run-3", []string{}},
	}
	view(t, s, func(tx bot.Tx) error {
		for _, tt := range tests {
			got, err := tx.Audit(tt.runID)
			if err != nil {
				return err
			}
			equal(t, "audit of run "+tt.runID, details(got), tt.want)
		}
		return nil
	})
}
