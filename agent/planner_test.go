package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// crew is a planned run under test: the planner plays an ordered script (only the run's own
// goroutine consults it), and the executors, which may run at once, answer by step from a
// queue of replies each.
type crew struct {
	t       *testing.T
	planner *scriptedLLM
	exec    *scriptedLLM
	mu      sync.Mutex
	steps   map[string][]step
}

func newCrew(t *testing.T, plannerScript []step, execSteps map[string][]step) *crew {
	t.Helper()
	c := &crew{t: t, planner: newLLM(t, plannerScript...), steps: execSteps}
	c.exec = newLLM(t)
	c.exec.route = func(req agent.Request) step {
		id := stepOf(req)
		c.mu.Lock()
		defer c.mu.Unlock()
		q := c.steps[id]
		if len(q) == 0 {
			return failure(500)
		}
		c.steps[id] = q[1:]
		return q[0]
	}
	return c
}

// stepOf finds the plan step an executor's request is about ("" for an unplanned run).
func stepOf(req agent.Request) string {
	for _, m := range req.Messages {
		if m.Role != agent.RoleUser {
			continue
		}
		if _, rest, ok := strings.Cut(m.Content, "Your step ("); ok {
			id, _, _ := strings.Cut(rest, ")")
			return id
		}
	}
	return ""
}

// execRequests returns the executor requests about step id.
func (c *crew) execRequests(id string) []agent.Request {
	var out []agent.Request
	for _, r := range c.exec.requests() {
		if stepOf(r) == id {
			out = append(out, r)
		}
	}
	return out
}

func (c *crew) agent(cfg agent.Config, tools ...agent.Tool) *agent.Agent {
	c.t.Helper()
	if cfg.Planning == "" {
		cfg.Planning = agent.PlanningAuto
	}
	return newAgent(c.t, c.exec.model, cfg, tools, agent.WithPlanner(c.planner.model))
}

func planJSON(steps ...string) step {
	return text(`{"needs_plan": true, "reason": "several parts", "steps": [` + strings.Join(steps, ",") + `]}`)
}

func planStep(id, desc, scope string, deps ...string) string {
	d, _ := json.Marshal(deps)
	if deps == nil {
		d = []byte("[]")
	}
	return fmt.Sprintf(`{"id": %q, "description": %q, "depends_on": %s, "acceptance": "it is answered", "scope": %q}`, id, desc, d, scope)
}

func accept() step { return text(`{"verdict": "accept", "reason": "meets the acceptance"}`) }

func wantConversation(t *testing.T, st *agent.State, want ...agent.MessageType) {
	t.Helper()
	var got []agent.MessageType
	for _, m := range st.Planning.Conversation {
		got = append(got, m.Type)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("conversation types = %v, want %v", got, want)
	}
}

func TestPlanAutoDecidesNoPlan(t *testing.T) {
	c := newCrew(t, []step{text(`{"needs_plan": false, "reason": "one lookup"}`)}, nil)
	c.exec.route = nil
	c.exec.script = []step{calls(call("read", `{"q":"x"}`)), text("It is 42.")}
	read := &fakeTool{name: "read", readOnly: true, idempotent: true}
	r := newRun(t, c.agent(agent.Config{}, read), "what is x?")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if r.st.Answer != "It is 42." || len(c.planner.requests()) != 1 {
		t.Fatalf("answer %q after %d planner calls, want the executor's answer after one", r.st.Answer, len(c.planner.requests()))
	}
	if r.st.Planning == nil || !r.st.Planning.Decided || len(r.st.Planning.Steps) != 0 {
		t.Fatalf("planning = %+v, want decided with no steps", r.st.Planning)
	}
	if !c.planner.requests()[0].JSON {
		t.Error("the planner was not asked for JSON")
	}
	// The run went on as an unplanned run does: the executor kept its checklist tool.
	if names := strings.Join(c.exec.toolNames(0), ","); !strings.Contains(names, "update_plan") || strings.Contains(names, "ask_planner") {
		t.Errorf("executor tools = %s, want the loop's own", names)
	}
	if r.st.Usage.Calls != 3 {
		t.Errorf("usage counts %d calls, want the planner's and the executor's 3", r.st.Usage.Calls)
	}
}

func TestPlanOffNeverAsksThePlanner(t *testing.T) {
	c := newCrew(t, nil, nil)
	c.exec.route = nil
	c.exec.script = []step{text("done")}
	r := newRun(t, newAgent(t, c.exec.model, agent.Config{}, nil, agent.WithPlanner(c.planner.model)), "hi")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if n := len(c.planner.requests()); n != 0 || r.st.Planning != nil {
		t.Fatalf("planner consulted %d times with planning off", n)
	}
}

func TestPlanThreeStepsWithDependency(t *testing.T) {
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "find the release date", agent.ScopeReadOnly),
				planStep("s2", "find the price", agent.ScopeReadOnly),
				planStep("s3", "write the announcement", agent.ScopeFull, "s1")),
			accept(), accept(), accept(),
		},
		map[string][]step{
			"s1": {calls(call("read", `{"q":"date"}`)), text("The release is on 3 March.")},
			"s2": {text("It costs 5 euros.")},
			"s3": {calls(call("write", `{"q":"announcement"}`)), text("Announced for 3 March.")},
		})
	read := &fakeTool{name: "read", readOnly: true, idempotent: true}
	write := &fakeTool{name: "write"}
	r := newRun(t, c.agent(agent.Config{MaxParallelSteps: 1}, read, write), "announce the release")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	p := r.st.Planning
	for _, s := range p.Steps {
		if s.Status != agent.PlanDone || s.Sub == nil || s.Sub.Status != agent.StatusCompleted {
			t.Fatalf("step %s is %s (sub %v), want done", s.ID, s.Status, s.Sub)
		}
	}
	// s3 built on s1's result, in a context of its own: not s2's, and not the planner's.
	s3 := c.execRequests("s3")
	if len(s3) != 2 || !c.exec.sawUserTextIn(s3[0], "The release is on 3 March.") || c.exec.sawUserTextIn(s3[0], "5 euros") {
		t.Fatalf("s3's first request did not carry s1's result alone: %+v", s3)
	}
	// Scopes: the read-only step had no write tool; every executor has ask_planner and
	// read_output, and not the person's ask_user or the checklist.
	names := func(req agent.Request) string {
		var n []string
		for _, tool := range req.Tools {
			n = append(n, tool.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(c.execRequests("s1")[0]); got != "read_output,read,ask_planner" {
		t.Errorf("read-only executor tools = %s", got)
	}
	if got := names(s3[0]); got != "read_output,read,write,ask_planner" {
		t.Errorf("full executor tools = %s", got)
	}
	if !strings.Contains(r.st.Answer, "Announced for 3 March.") || !strings.Contains(r.st.Answer, "5 euros") {
		t.Errorf("answer %q, want the results of the last steps", r.st.Answer)
	}
	// The plan is the checklist the card shows.
	if len(r.st.Plan) != 3 || r.st.Plan[2].Status != agent.PlanDone || !strings.HasPrefix(r.st.Plan[2].Step, "s3: ") {
		t.Errorf("checklist = %+v", r.st.Plan)
	}
	wantConversation(t, r.st, agent.MsgProgressUpdate,
		agent.MsgTaskAssignment, agent.MsgTaskComplete, agent.MsgProgressUpdate,
		agent.MsgTaskAssignment, agent.MsgTaskComplete, agent.MsgProgressUpdate,
		agent.MsgTaskAssignment, agent.MsgTaskComplete, agent.MsgProgressUpdate)
	// The whole run's spending: 4 planner calls and 5 executor calls.
	if r.st.Step != 9 || r.st.Usage.Calls != 9 {
		t.Errorf("step %d, %d calls, want 9 and 9", r.st.Step, r.st.Usage.Calls)
	}
	// A saved planned run reads back.
	r.reload()
	if len(r.st.Planning.Steps) != 3 {
		t.Fatal("the plan did not survive a reload")
	}
}

// sawUserTextIn reports whether req carried a user message containing s.
func (l *scriptedLLM) sawUserTextIn(req agent.Request, s string) bool {
	for _, m := range req.Messages {
		if m.Role == agent.RoleUser && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// barrierTool holds each call until want calls are in at once (or its context ends), and
// records the most calls ever in at once.
type barrierTool struct {
	fakeTool
	want    int32
	in, max atomic.Int32
	started atomic.Int32
	all     chan struct{}
	once    sync.Once
}

func newBarrier(want int32) *barrierTool {
	b := &barrierTool{want: want, all: make(chan struct{})}
	b.name, b.readOnly, b.idempotent, b.timeout = "lookup", true, true, 10*time.Second
	b.fn = func(ctx context.Context, _ json.RawMessage) (string, error) {
		n := b.in.Add(1)
		defer b.in.Add(-1)
		for {
			m := b.max.Load()
			if n <= m || b.max.CompareAndSwap(m, n) {
				break
			}
		}
		if b.started.Add(1) >= b.want {
			b.once.Do(func() { close(b.all) })
		}
		select {
		case <-b.all:
			return "found", nil
		case <-ctx.Done():
			return "", fmt.Errorf("the other steps never ran alongside")
		}
	}
	return b
}

func TestPlanParallelIndependentSteps(t *testing.T) {
	exec := map[string][]step{}
	var specs []string
	for _, id := range []string{"a", "b", "c"} {
		exec[id] = []step{calls(call("lookup", `{"q":"`+id+`"}`)), text("result " + id)}
		specs = append(specs, planStep(id, "look up "+id, agent.ScopeReadOnly))
	}
	c := newCrew(t, []step{planJSON(specs...), accept(), accept(), accept()}, exec)
	// The first two steps must be in their tools at once; the third runs in the next round.
	b := newBarrier(2)
	r := newRun(t, c.agent(agent.Config{MaxParallelSteps: 2}, b), "look up a, b and c")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if got := b.max.Load(); got != 2 {
		t.Fatalf("at most %d steps ran at once, want the limit of 2", got)
	}
	// The third step was assigned only once the first round was over.
	wantConversation(t, r.st, agent.MsgProgressUpdate, agent.MsgTaskAssignment, agent.MsgTaskAssignment,
		agent.MsgTaskComplete, agent.MsgProgressUpdate, agent.MsgTaskComplete, agent.MsgProgressUpdate,
		agent.MsgTaskAssignment, agent.MsgTaskComplete, agent.MsgProgressUpdate)
	for _, s := range r.st.Planning.Steps {
		if s.Status != agent.PlanDone || s.Sub.Calls[0].Status != agent.CallSucceeded {
			t.Errorf("step %s: %s, call %s", s.ID, s.Status, s.Sub.Calls[0].Status)
		}
	}
}

func TestPlanExecutorQuestionAnsweredByPlanner(t *testing.T) {
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "pick the colour", agent.ScopeReadOnly), planStep("s2", "paint", agent.ScopeFull, "s1")),
			text(`{"answer": "Blue, as the goal says.", "escalate": false}`),
			accept(), accept(),
		},
		map[string][]step{
			"s1": {calls(call("ask_planner", `{"question":"Which colour?"}`)), text("Blue.")},
			"s2": {text("Painted blue.")},
		})
	r := newRun(t, c.agent(agent.Config{}), "paint the shed blue")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	s1 := c.execRequests("s1")
	if len(s1) != 2 || !c.exec.sawToolResultIn(s1[1], "The planner answers: Blue, as the goal says.") {
		t.Fatalf("the executor was not given the planner's answer")
	}
	if !c.planner.sawUserText(1, "Which colour?") || !c.planner.sawUserText(1, "Goal: paint the shed blue") {
		t.Error("the planner was not asked the question with the plan")
	}
	q, a := r.st.Planning.LastQuestion()
	if q == nil || a == nil || q.Text != "Which colour?" || a.From != "planner" || a.Text != "Blue, as the goal says." {
		t.Fatalf("last question %+v, answer %+v", q, a)
	}
	wantConversation(t, r.st, agent.MsgProgressUpdate, agent.MsgTaskAssignment, agent.MsgQuestion, agent.MsgClarification,
		agent.MsgTaskComplete, agent.MsgProgressUpdate, agent.MsgTaskAssignment, agent.MsgTaskComplete, agent.MsgProgressUpdate)
}

func (l *scriptedLLM) sawToolResultIn(req agent.Request, s string) bool {
	for _, m := range req.Messages {
		if m.Role == agent.RoleTool && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

func TestPlanQuestionEscalatedToPerson(t *testing.T) {
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "book the table", agent.ScopeFull), planStep("s2", "tell the team", agent.ScopeFull, "s1")),
			text(`{"escalate": true}`),
			accept(), accept(),
		},
		map[string][]step{
			"s1": {calls(call("ask_planner", `{"question":"Which evening suits you?"}`)), text("Booked for Friday.")},
			"s2": {text("Told.")},
		})
	r := newRun(t, c.agent(agent.Config{}), "book a team dinner")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if p := r.st.Pause; p.Kind != agent.PauseAskUser || p.Question != "Which evening suits you?" || p.Step != "s1" {
		t.Fatalf("pause = %+v, want the executor's question for the person", p)
	}
	r.reload() // the answer may come to another process
	if err := r.st.Respond("Friday", "alice"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if s1 := c.execRequests("s1"); !c.exec.sawToolResultIn(s1[1], "The user (alice) answered: Friday") {
		t.Fatal("the executor was not given the person's answer")
	}
	q, a := r.st.Planning.LastQuestion()
	if q == nil || a == nil || a.From != "person alice" || a.Text != "Friday" {
		t.Fatalf("last question %+v, answer %+v", q, a)
	}
	// The planner was asked once: the plan, the question, the two reviews.
	if n := len(c.planner.requests()); n != 4 {
		t.Errorf("the planner was consulted %d times, want 4", n)
	}
}

func TestPlanStepRetriedWithGuidance(t *testing.T) {
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "summarise the report", agent.ScopeReadOnly)),
			text(`{"verdict": "retry", "reason": "no figures", "guidance": "Give the revenue figure."}`),
			accept(),
		},
		map[string][]step{"s1": {text("It went well."), text("Revenue was 3M.")}})
	r := newRun(t, c.agent(agent.Config{}), "summarise the report")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	s := r.st.Planning.Steps[0]
	if s.Attempts != 2 || s.Result != "Revenue was 3M." || r.st.Answer != "Revenue was 3M." {
		t.Fatalf("step after retry: %+v", s)
	}
	if reqs := c.execRequests("s1"); !c.exec.sawUserTextIn(reqs[1], "Give the revenue figure.") || c.exec.sawUserTextIn(reqs[1], "It went well.") {
		t.Fatal("the second attempt did not start afresh with the guidance")
	}
	var retry *agent.PlanMessage
	for i, m := range r.st.Planning.Conversation {
		if m.Verdict == agent.VerdictRetry {
			retry = &r.st.Planning.Conversation[i]
		}
	}
	if retry == nil || retry.Reason != "no figures" || retry.Type != agent.MsgTaskAssignment {
		t.Fatalf("retry not recorded with its reason: %+v", retry)
	}
	// The first attempt's spending still counts: 3 planner and 2 executor calls.
	if r.st.Step != 5 {
		t.Errorf("step %d, want 5", r.st.Step)
	}
}

func TestPlanRetryBound(t *testing.T) {
	retry := text(`{"verdict": "retry", "reason": "still wrong", "guidance": "try again"}`)
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "guess", agent.ScopeReadOnly)), retry, retry, retry, retry},
		map[string][]step{"s1": {text("1"), text("2"), text("3"), text("4")}})
	r := newRun(t, c.agent(agent.Config{StepRetries: 2}), "guess the number")
	r.advance()
	r.wantStatus(agent.StatusFailed)
	if s := r.st.Planning.Steps[0]; s.Attempts != 3 || s.Status != agent.PlanFailed {
		t.Fatalf("step %+v, want failed after 3 attempts", s)
	}
	if !strings.Contains(r.st.Error, "not done after 3 attempts") {
		t.Errorf("error %q", r.st.Error)
	}
}

func TestPlanRevisedAfterFailedStep(t *testing.T) {
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "fetch the page", agent.ScopeReadOnly), planStep("s2", "summarise it", agent.ScopeReadOnly, "s1")),
			text(`{"verdict": "revise", "reason": "the site is down", "steps": [` + planStep("s1b", "read the cached copy", agent.ScopeReadOnly) + `,` +
				planStep("s2", "summarise the copy", agent.ScopeReadOnly, "s1b") + `]}`),
			accept(), accept(),
		},
		map[string][]step{
			"s1":  {calls(call("fetch", `{"q":"page"}`))},
			"s1b": {text("cached text")},
			"s2":  {text("a summary")},
		})
	fetch := &fakeTool{name: "fetch", readOnly: true, idempotent: true, fn: failing("site down")}
	cfg := agent.Config{FailureHandling: agent.FailureAbort, MaxConsecutiveFailures: 1}
	r := newRun(t, c.agent(cfg, fetch), "summarise the page")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	p := r.st.Planning
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID+"="+string(s.Status))
	}
	if got := strings.Join(ids, " "); got != "s1b=done s2=done" || p.Revisions != 1 {
		t.Fatalf("steps after revision: %s (%d revisions)", got, p.Revisions)
	}
	if s2 := c.execRequests("s2"); !c.exec.sawUserTextIn(s2[0], "cached text") {
		t.Error("the revised step did not build on the new one")
	}
	found := false
	for _, m := range p.Conversation {
		found = found || m.Type == agent.MsgError && m.Step == "s1"
	}
	if !found {
		t.Error("the executor's failure is not in the conversation")
	}
}

func TestPlanBudgetSharedAcrossSteps(t *testing.T) {
	read := &fakeTool{name: "read", readOnly: true, idempotent: true}
	loop := []step{}
	for i := range 10 {
		loop = append(loop, calls(call("read", fmt.Sprintf(`{"q":"%d"}`, i))))
	}
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "read", agent.ScopeReadOnly), planStep("s2", "read more", agent.ScopeReadOnly, "s1")), accept()},
		map[string][]step{"s1": {calls(call("read", `{"q":"a"}`)), calls(call("read", `{"q":"b"}`)), text("s1 done")}, "s2": loop})
	// 8 steps for the whole run: the planner's 2, s1's 3, and s2 may take only what is left.
	r := newRun(t, c.agent(agent.Config{MaxSteps: 8}, read), "read it all")
	r.advance()
	r.wantStatus(agent.StatusBudgetExhausted)
	s2 := r.st.Planning.Step("s2")
	if s2.Sub.Step > 3 || r.st.Step > 8 {
		t.Fatalf("s2 took %d steps, the run %d: the budget was not shared", s2.Sub.Step, r.st.Step)
	}
	if !strings.Contains(r.st.Error, "step budget") {
		t.Errorf("error %q", r.st.Error)
	}
}

func TestPlanInvalidPlansRefused(t *testing.T) {
	cycle := planJSON(planStep("s1", "a", agent.ScopeFull, "s2"), planStep("s2", "b", agent.ScopeFull, "s1"))
	c := newCrew(t, []step{cycle, planJSON(planStep("s1", "a", agent.ScopeFull)), accept()},
		map[string][]step{"s1": {text("done a")}})
	r := newRun(t, c.agent(agent.Config{}), "do a and b")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !c.planner.sawUserText(1, "cycle") {
		t.Fatal("the planner was not told its plan had a cycle")
	}

	// Garbage twice: the run goes on unplanned.
	c = newCrew(t, []step{text("sure, here is a plan"), text(`{"needs_plan": "yes"}`)}, nil)
	c.exec.route = nil
	c.exec.script = []step{text("done anyway")}
	r = newRun(t, c.agent(agent.Config{}), "do it")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if r.st.Answer != "done anyway" || len(r.st.Planning.Steps) != 0 || len(c.planner.requests()) != 2 {
		t.Fatalf("answer %q, %d planner calls", r.st.Answer, len(c.planner.requests()))
	}
}

func TestPlanApprovalPausesAtStepBoundary(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "deploy", agent.ScopeFull), planStep("s2", "check docs", agent.ScopeReadOnly)), accept(), accept()},
		map[string][]step{
			"s1": {calls(call("deploy", `{"q":"prod"}`)), text("deployed")},
			"s2": {calls(call("read", `{"q":"docs"}`)), text("docs fine")},
		})
	deploy := &fakeTool{name: "deploy", risk: agent.RiskConfirm}
	read := &fakeTool{name: "read", readOnly: true, idempotent: true}
	r := newRun(t, c.agent(agent.Config{}, deploy, read), "deploy and check")
	r.advance()
	r.wantStatus(agent.StatusAwaitingApproval)
	pending := r.st.PendingApprovals()
	if len(pending) != 1 || pending[0].Name != "deploy" || r.st.Call(pending[0].ID) == nil {
		t.Fatalf("pending approvals = %+v", pending)
	}
	// The other step went on to its end in the same round.
	if s2 := r.st.Planning.Step("s2"); s2.Sub.Status != agent.StatusCompleted {
		t.Errorf("s2 is %s while s1 waited", s2.Sub.Status)
	}
	r.reload()
	if err := r.st.Decide(pending[0].ID, agent.Decision{Approved: true, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusRunning)
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if deploy.calls.Load() != 1 {
		t.Errorf("deploy ran %d times", deploy.calls.Load())
	}
	found := false
	for _, m := range r.st.Planning.Conversation {
		found = found || m.Type == agent.MsgProgressUpdate && m.From == "executor s1" && strings.Contains(m.Text, "approve deploy")
	}
	if !found {
		t.Error("the wait for approval is not in the conversation")
	}
}

func TestPlanResumesMidStep(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "send the mail", agent.ScopeFull)), accept()},
		map[string][]step{"s1": {calls(call("send", `{"q":"mail"}`)), text("sent, but check the outbox")}})
	var r *run
	var killed []byte
	send := &fakeTool{name: "send", fn: func(context.Context, json.RawMessage) (string, error) {
		// The process dies here, with the call's intent on disk: what it saved last is what
		// the next process reads.
		r.mu.Lock()
		killed = r.saves[len(r.saves)-1]
		r.mu.Unlock()
		return "sent", nil
	}}
	r = newRun(t, c.agent(agent.Config{}, send), "send the mail")
	r.advance()
	st, err := agent.UnmarshalState(killed)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Planning.Step("s1"); s.Sub.Calls[0].Status != agent.CallStarted {
		t.Fatalf("the checkpoint before the call has it %s", s.Sub.Calls[0].Status)
	}
	// A new process: a new agent over the stored state.
	c.steps["s1"] = []step{text("sent, but check the outbox")}
	c.planner.script = []step{accept()}
	r2 := newRun(t, c.agent(agent.Config{}, send), "send the mail")
	r2.st = st
	r2.advance()
	r2.wantStatus(agent.StatusCompleted)
	sub := r2.st.Planning.Step("s1").Sub
	if sub.Calls[0].Status != agent.CallUnknown || send.calls.Load() != 1 {
		t.Fatalf("after resume the call is %s and ran %d times; want unknown, once", sub.Calls[0].Status, send.calls.Load())
	}
}

func TestPlanCancelSettlesStepCalls(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "deploy", agent.ScopeFull))},
		map[string][]step{"s1": {calls(call("deploy", `{"q":"prod"}`))}})
	deploy := &fakeTool{name: "deploy", risk: agent.RiskConfirm}
	r := newRun(t, c.agent(agent.Config{}, deploy), "deploy")
	r.advance()
	r.wantStatus(agent.StatusAwaitingApproval)
	if err := r.st.Cancel("stop", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, call := range r.st.AllCalls() {
		if call.Status != agent.CallRejected {
			t.Errorf("call %s is %s after the cancel, want rejected", call.ID, call.Status)
		}
	}
	if sub := r.st.Planning.Steps[0].Sub; sub.Status != agent.StatusCancelled || len(r.st.PendingApprovals()) != 0 {
		t.Errorf("sub-run %s with %d pending approvals", sub.Status, len(r.st.PendingApprovals()))
	}
}

// A planned run that fails while another step waits for approval leaves no call waiting.
func TestPlanFailSettlesWaitingSteps(t *testing.T) {
	retry := text(`{"verdict": "retry", "reason": "wrong", "guidance": "again"}`)
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "deploy", agent.ScopeFull), planStep("s2", "guess", agent.ScopeReadOnly)), retry},
		map[string][]step{"s1": {calls(call("deploy", `{"q":"prod"}`))}, "s2": {text("1")}})
	deploy := &fakeTool{name: "deploy", risk: agent.RiskConfirm}
	r := newRun(t, c.agent(agent.Config{StepRetries: -1}, deploy), "deploy and guess")
	r.advance()
	r.wantStatus(agent.StatusFailed)
	for _, call := range r.st.AllCalls() {
		if call.Status == agent.CallAwaitingApproval {
			t.Errorf("call %s still awaits approval in a failed run", call.ID)
		}
	}
}

// An executor that builds on a result drawn from outside content is as exposed as the one
// that read it: its calls that could carry data out need approval.
func TestPlanExposureCarriesToDependents(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "read the page", agent.ScopeReadOnly), planStep("s2", "post it", agent.ScopeFull, "s1")), accept(), accept()},
		map[string][]step{
			"s1": {calls(call("http_fetch", `{"url":"https://example.com/"}`)), text("the page says hi")},
			"s2": {text("posted")},
		})
	fetch := &fakeTool{name: "http_fetch", readOnly: true, idempotent: true,
		schema: `{"type":"object","properties":{"url":{"type":"string"}}}`}
	r := newRun(t, c.agent(agent.Config{}, exposing{fetch}), "post what the page says")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if s2 := r.st.Planning.Step("s2"); s2.Sub.Exposed == "" || r.st.Exposed == "" {
		t.Fatalf("s2 exposed %q, run exposed %q: want both exposed by s1's page", s2.Sub.Exposed, r.st.Exposed)
	}
}

// exposing marks every call of its tool as reading outside content.
type exposing struct{ *fakeTool }

func (e exposing) Assess(args json.RawMessage) agent.Assessment {
	a := e.fakeTool.Assess(args)
	a.Reads = "https://example.com/"
	return a
}

// What a person says to a planned run reaches the planner's conversation and the executors
// that start after it.
func TestPlanSteeredByAPerson(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "draft", agent.ScopeReadOnly), planStep("s2", "polish", agent.ScopeReadOnly, "s1")), accept(), accept()},
		map[string][]step{"s1": {text("a draft")}, "s2": {text("polished")}})
	r := newRun(t, c.agent(agent.Config{}), "write it")
	notes := []agent.Note{{Seq: 1, From: "ann", Text: "keep it short"}}
	h := r.hooks()
	h.Steer = func(_ context.Context, after int) ([]agent.Note, error) {
		var out []agent.Note
		for _, n := range notes {
			if n.Seq > after {
				out = append(out, n)
			}
		}
		return out, nil
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	if r.st.SteerSeq != 1 {
		t.Fatalf("steer seq %d, want the note taken", r.st.SteerSeq)
	}
	if !c.exec.sawUserTextIn(c.execRequests("s2")[0], "ann said: keep it short") {
		t.Error("a later executor was not told the person's note")
	}
	found := false
	for _, m := range r.st.Planning.Conversation {
		found = found || m.From == "person ann" && m.Text == "keep it short"
	}
	if !found {
		t.Error("the note is not in the conversation")
	}
}

// A shutdown while the planner reviews a result leaves the step to be reviewed again when the
// run resumes, not accepted by default.
func TestPlanReviewInterrupted(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "look", agent.ScopeReadOnly)), accept()},
		map[string][]step{"s1": {text("seen")}})
	ag := c.agent(agent.Config{})
	r := newRun(t, ag, "look")
	ctx, cancel := context.WithCancel(context.Background())
	// The planner's second call (the review) fails as the context ends: a shutdown.
	replies := []step{planJSON(planStep("s1", "look", agent.ScopeReadOnly)), failure(500), accept()}
	n := 0
	c.planner.route = func(req agent.Request) step {
		n++
		if n == 2 {
			cancel()
		}
		return replies[n-1]
	}
	if err := ag.Run(ctx, r.st, r.hooks()); err == nil {
		t.Fatal("an interrupted run returned no error")
	}
	if s := r.st.Planning.Steps[0]; s.Status != agent.PlanInProgress {
		t.Fatalf("after the interruption the step is %s, want still in progress", s.Status)
	}
	r.reload()
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	var types []agent.MessageType
	for _, m := range r.st.Planning.Conversation {
		types = append(types, m.Type)
	}
	if fmt.Sprint(types) != "[progress_update task_assignment task_complete progress_update]" {
		t.Errorf("conversation %v", types)
	}
}

// A revision that would make the plan longer than a saved plan may be is sent back, so the run
// stays resumable.
func TestPlanRevisionBounded(t *testing.T) {
	var many []string
	for i := range 20 {
		many = append(many, planStep(fmt.Sprintf("n%d", i), "more", agent.ScopeReadOnly))
	}
	tooLong := text(`{"verdict": "revise", "reason": "more", "steps": [` + strings.Join(many, ",") + `]}`)
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "a", agent.ScopeReadOnly)), tooLong, accept()},
		map[string][]step{"s1": {text("done a")}})
	r := newRun(t, c.agent(agent.Config{}), "do a")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !c.planner.sawUserText(2, "at most 19 new ones") || len(r.st.Planning.Steps) != 1 {
		t.Fatalf("the long revision was not sent back: %d steps", len(r.st.Planning.Steps))
	}
	r.reload()
}

// An executor's question is answered while the other executors of its round still work: here
// s2 holds in its tool until s1 has had the planner's answer.
func TestPlanQuestionAnsweredMidRound(t *testing.T) {
	answered := make(chan struct{})
	var once sync.Once
	c := newCrew(t,
		[]step{
			planJSON(planStep("s1", "pick the colour", agent.ScopeReadOnly), planStep("s2", "fetch the brushes", agent.ScopeReadOnly)),
			text(`{"answer": "Blue.", "escalate": false}`),
			accept(), accept(),
		},
		map[string][]step{
			"s1": {calls(call("ask_planner", `{"question":"Which colour?"}`)), text("Blue.")},
			"s2": {calls(call("hold", `{"q":"brushes"}`)), text("Brushes fetched.")},
		})
	route := c.exec.route
	c.exec.route = func(req agent.Request) step {
		if stepOf(req) == "s1" && c.exec.sawToolResultIn(req, "The planner answers: Blue.") {
			once.Do(func() { close(answered) })
		}
		return route(req)
	}
	hold := &fakeTool{name: "hold", readOnly: true, idempotent: true, timeout: 10 * time.Second,
		fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case <-answered:
				return "held", nil
			case <-ctx.Done():
				return "", fmt.Errorf("s1's question was not answered while s2 worked")
			}
		}}
	r := newRun(t, c.agent(agent.Config{MaxParallelSteps: 2}, hold), "paint the shed")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if call := r.st.Planning.Step("s2").Sub.Calls[0]; call.Status != agent.CallSucceeded {
		t.Fatalf("s2's call %s: %s", call.Status, call.Error)
	}
	if q, a := r.st.Planning.LastQuestion(); q == nil || a == nil || a.Text != "Blue." {
		t.Fatalf("question %+v, answer %+v", q, a)
	}
}

// A run limited to some tools (a playbook's allowlist) limits its executors alike.
func TestPlanExecutorsKeepTheAllowlist(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "clean up", agent.ScopeFull)), accept()},
		map[string][]step{"s1": {calls(call("wipe", `{"q":"all"}`)), text("could not wipe")}})
	wipe := &fakeTool{name: "wipe"}
	read := &fakeTool{name: "read", readOnly: true, idempotent: true}
	r := newRun(t, c.agent(agent.Config{}, wipe, read), "clean up")
	r.st.AllowedTools = []string{"read"}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if wipe.calls.Load() != 0 {
		t.Fatal("an executor called a tool the run may not use")
	}
	if got := c.exec.toolNames(0); strings.Join(got, ",") != "read_output,read,ask_planner" {
		t.Errorf("executor offered %v, want the allowed tool, read_output and ask_planner", got)
	}
}

// "Approve for this run" on one executor's call lets the later executors' calls of the tool
// run without asking, and a person's Pause stops the planned run at a round's boundary.
func TestPlanRunGrantAndPause(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "deploy staging", agent.ScopeFull), planStep("s2", "deploy prod", agent.ScopeFull, "s1")), accept(), accept()},
		map[string][]step{
			"s1": {calls(call("deploy", `{"q":"staging"}`)), text("staging deployed")},
			"s2": {calls(call("deploy", `{"q":"prod"}`)), text("prod deployed")},
		})
	deploy := &fakeTool{name: "deploy", risk: agent.RiskConfirm}
	r := newRun(t, c.agent(agent.Config{}, deploy), "deploy both")
	r.advance()
	r.wantStatus(agent.StatusAwaitingApproval)
	p := r.st.PendingApprovals()
	if _, err := r.st.GrantRun(r.st.Call(p[0].ID), "g1", "bob", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r.st.Decide(p[0].ID, agent.Decision{Approved: true, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	// Ann asks for a pause: the run stops before the next round.
	h := r.hooks()
	held := "ann"
	h.Hold = func(context.Context) (string, error) { return held, nil }
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PausePerson || r.st.Planning.Step("s2").Status != agent.PlanPending {
		t.Fatalf("pause %+v with s2 %s, want paused by a person before s2", r.st.Pause, r.st.Planning.Step("s2").Status)
	}
	if err := r.st.Respond("", "ann"); err != nil {
		t.Fatal(err)
	}
	held = ""
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	if n := deploy.calls.Load(); n != 2 {
		t.Fatalf("deploy ran %d times, want 2", n)
	}
	if c := r.st.Planning.Step("s2").Sub.Calls[0]; c.GrantedBy == nil || c.Decision != nil {
		t.Errorf("s2's deploy: granted by %+v, decision %+v; want it run under the run's grant", c.GrantedBy, c.Decision)
	}
}

// A sanity check a person asks for in a planned run's thread reviews its executors, and their
// verdicts join the run's, which the thread is shown.
func TestPlanSanityOnDemand(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "draft", agent.ScopeReadOnly)), accept()},
		map[string][]step{"s1": {text("a draft")}})
	sanity := newLLM(t, text(`{"verdict": "concerns", "note": "check the date"}`))
	ag := newAgent(t, c.exec.model, agent.Config{Planning: agent.PlanningAuto}, nil, agent.WithPlanner(c.planner.model), agent.WithSanity(sanity.model))
	r := newRun(t, ag, "write it")
	h := r.hooks()
	h.Steer = func(_ context.Context, after int) ([]agent.Note, error) {
		if after >= 1 {
			return nil, nil
		}
		return []agent.Note{{Seq: 1, From: "ann", Sanity: true}}, nil
	}
	if err := ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	if len(r.st.Reviews) != 1 || r.st.Reviews[0].Note != "check the date" || !strings.Contains(r.st.Reviews[0].Why, "ann") {
		t.Fatalf("run reviews = %+v, want the executor's review asked by ann", r.st.Reviews)
	}
	if !c.exec.sawUserTextIn(c.execRequests("s1")[0], "Note from the reviewer: check the date") {
		t.Error("the executor was not given the reviewer's note")
	}
}

// A tool an executor calls may ask the person (ask.go): the question goes out as the run's,
// naming the executor's call, which the run finds.
func TestPlanToolAsksThePerson(t *testing.T) {
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "configure", agent.ScopeReadOnly)), accept()},
		map[string][]step{"s1": {calls(call("setup", `{"q":"x"}`)), text("configured")}})
	setup := &fakeTool{name: "setup", readOnly: true, idempotent: true, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		a, err := agent.Ask(ctx, agent.Question{From: "setup", Text: "Which region?"})
		return "region " + a.Text, err
	}}
	r := newRun(t, c.agent(agent.Config{}, setup), "configure it")
	h := r.hooks()
	var gotRun, gotCall string
	h.Ask = func(_ context.Context, runID, callID string, q agent.Question) (agent.Answer, error) {
		gotRun, gotCall = runID, callID
		return agent.Answer{Kind: agent.AnswerGiven, Text: "eu", By: "ann"}, nil
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	if gotRun != r.st.RunID || r.st.Call(gotCall) == nil || r.st.Call(gotCall).Output != "region eu" {
		t.Fatalf("asked as run %q about call %q: want the run's ID and a call it finds", gotRun, gotCall)
	}
}
