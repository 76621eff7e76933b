package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// Hooks are the per-run callbacks of Run.
type Hooks struct {
	// Checkpoint saves the state. It is called before any tool with side effects runs (so the
	// intent is durable), after every step (once, after the results, when the step's calls are
	// all idempotent and need no person), and when the run pauses or ends. An error stops
	// the run: a loop that cannot save must not act.
	Checkpoint func(ctx context.Context, st *State) error
	// Observer sees every transition; nil ignores them.
	Observer Observer
	// Steer returns what people said to the run in its thread after note number after
	// (steer.go); nil means nobody can steer.
	Steer func(ctx context.Context, after int) ([]Note, error)
	// Ask puts a tool's question to the run's thread and waits for the answer (ask.go); nil
	// means tools cannot ask, and Ask returns ErrNoAsk.
	Ask func(ctx context.Context, runID, callID string, q Question) (Answer, error)
	// Grants returns the grants of the run's channel (grant.go), read at most once a step,
	// when a call would wait for approval; nil means the channel has none.
	Grants func(ctx context.Context) ([]Grant, error)
	// Hold returns who asked the run to pause, or "" when nobody did (pause.go); it is
	// asked at every step boundary. nil means nobody can pause the run.
	Hold func(ctx context.Context) (by string, err error)
	// Autonomy returns the autonomy level of the run's channel as it is now (autonomy.go); nil
	// or an empty level keeps the one the state records.
	Autonomy func(ctx context.Context) (Level, error)
	// Text sees the executor's reply as it is written, when the model streams (stream.go);
	// nil streams nothing. It must not block for long: the model's stream waits for it.
	Text func(ctx context.Context, d TextDelta)
	// SaveAhead lets the loop write the checkpoint that ends a step while it goes on to ask
	// the model for the next one (saveahead.go): Checkpoint is then also called from another
	// goroutine, with a snapshot of the state (State.Snapshot), and must be safe for that.
	SaveAhead bool
}

// Agent runs goals with one model and one set of tools. It holds no per-run state, so one
// Agent serves any number of concurrent runs.
type Agent struct {
	cfg        Config
	model      Model
	summarizer Model
	sanity     Model
	tools      map[string]*registered
	specs      []ToolSpec
	now        func() time.Time
	log        *slog.Logger
	abandoned  *abandoned
	planner    Model
	secrets    SecretScan
}

type registered struct {
	tool   Tool
	info   ToolInfo
	schema argsSchema
}

// Option configures an Agent.
type Option func(*Agent)

// WithSummarizer sets the model that digests older tool outputs (strategy summarize).
func WithSummarizer(m Model) Option { return func(a *Agent) { a.summarizer = m } }

// WithPlanner sets the model that plans a goal, answers executors' questions and reviews their
// results (planner.go); without it the executor's model plans.
func WithPlanner(m Model) Option { return func(a *Agent) { a.planner = m } }

// WithSanity sets the cheap model of the sanity check.
func WithSanity(m Model) Option { return func(a *Agent) { a.sanity = m } }

// WithClock sets the clock for elapsed time and timestamps.
func WithClock(now func() time.Time) Option { return func(a *Agent) { a.now = now } }

// WithLogger sets the logger for details that never reach the model or the thread.
func WithLogger(l *slog.Logger) Option { return func(a *Agent) { a.log = l } }

// New builds an Agent. Tool names must be unique and must not take the names of the loop's
// control tools; every tool's parameters must be a JSON object, whose schema is compiled
// when a run first needs it (schemas.go).
func New(cfg Config, model Model, tools []Tool, opts ...Option) (*Agent, error) {
	if model == nil {
		return nil, errors.New("new agent: no model")
	}
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	a := &Agent{
		cfg:       cfg.Defaults(),
		model:     model,
		tools:     make(map[string]*registered, len(tools)+2),
		now:       time.Now,
		log:       slog.Default(),
		abandoned: &abandoned{},
	}
	for _, o := range opts {
		o(a)
	}
	for _, t := range append(controlTools(), tools...) {
		info := t.Info()
		name := info.Spec.Name
		if name == "" {
			return nil, errors.New("new agent: a tool has no name")
		}
		if _, dup := a.tools[name]; dup {
			return nil, fmt.Errorf("new agent: two tools are named %q", name)
		}
		if err := checkSchemaText(info.Spec.Parameters); err != nil {
			return nil, fmt.Errorf("new agent: tool %s: %w", name, err)
		}
		a.tools[name] = &registered{tool: t, info: info, schema: newToolSchema(info.Spec.Parameters)}
		a.specs = append(a.specs, info.Spec)
	}
	return a, nil
}

// Config returns the configuration in force, defaults filled in.
func (a *Agent) Config() Config { return a.cfg }

// Specs returns the tool specs the model sees, control tools included.
func (a *Agent) Specs() []ToolSpec { return append([]ToolSpec(nil), a.specs...) }

// errLoopTimeout is the cause of the context a run works under once its wall-time budget
// is spent.
var errLoopTimeout = errors.New("wall-time budget spent")

// Run advances st until the run completes, fails, is cancelled, exhausts its budget or
// waits for a person. A paused or finished state is returned unchanged. Run returns an
// error only when the run could not be advanced or saved: ctx ending for any cause other
// than ErrCancelled (the process stops; the run resumes from its last checkpoint) or a
// checkpoint failing.
func (a *Agent) Run(ctx context.Context, st *State, h Hooks) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if st.Status.Terminal() || st.Status.Paused() {
		return nil
	}
	r := &runner{a: a, st: st, h: h, mark: a.now()}
	err := r.run(ctx)
	// A save still being written is the run's too: nothing may write for the run after Run
	// returned, and a refused one is the run's error.
	if perr := r.settle(); perr != nil && err == nil {
		err = perr
	}
	return err
}

type runner struct {
	a    *Agent
	st   *State
	h    Hooks
	mark time.Time // when Active was last brought up to date
	// share, stepID and callPrefix are set for an executor's sub-run (executor.go).
	share      *share
	stepID     string
	callPrefix string
	// planMu is the lock of the round of executors at work, if any (executor.go).
	planMu *sync.Mutex
	// promptTokens is the size of the latest prompt; sanityAsked says who asked for a
	// sanity check at the next step boundary (review.go).
	promptTokens int
	sanityAsked  string
	// pinnedWarned is set once the log was told that pinned facts were left out.
	pinnedWarned bool
	// system is the system text last built (context.go).
	system systemText
	// pending reports the result of the checkpoint being written while the loop goes on
	// (saveahead.go); nil when none is.
	pending chan error
}

func (r *runner) run(ctx context.Context) error {
	st := r.st
	start, queued := st.Recover, st.Status == StatusQueued
	if queued {
		start = st.Start
	}
	if err := start(r.a.now()); err != nil {
		return fmt.Errorf("run %s: %w", st.RunID, err)
	}
	if st.Nonce == "" {
		st.Nonce = newNonce()
	}
	r.emit(Event{Kind: EventResumed})
	// A tool whose schema does not compile would fail every call of it; the run fails
	// before the model is offered it.
	if err := r.a.CheckSchemas(); err != nil {
		return r.fail(ctx, err.Error())
	}
	// A run that starts says so before its first model call, which may take a while of
	// retries: otherwise the thread shows it queued all that time.
	if queued {
		if err := r.save(ctx); err != nil {
			return err
		}
	}

	remaining := time.Duration(r.a.cfg.MaxWall) - st.Active
	if remaining <= 0 {
		return r.exhausted(ctx, "the wall-time budget is spent")
	}
	wctx, cancel := context.WithTimeoutCause(ctx, remaining, errLoopTimeout)
	defer cancel()
	if r.planned(wctx) {
		return r.runPlan(ctx, wctx)
	}

	for {
		if err := r.interrupted(ctx, wctx); err != nil || r.stopped() {
			return err
		}
		if r.pendingCalls() {
			if err := r.finishStep(ctx, wctx); err != nil {
				return err
			}
			continue
		}
		if reason := r.overBudget(); reason != "" {
			return r.exhausted(ctx, reason)
		}
		if held, err := r.holdRequested(ctx, wctx); held || err != nil {
			return err
		}
		r.steer(wctx)
		if paused, err := r.askedSanity(ctx, wctx); err != nil || paused {
			return err
		}
		r.refreshLevel(wctx)
		if reason := r.nearBudget(); reason != "" {
			return r.finalAnswer(ctx, wctx, reason)
		}
		if err := r.step(ctx, wctx); err != nil {
			return err
		}
	}
}

// stopped reports whether the run needs nothing more from the loop for now.
func (r *runner) stopped() bool { return r.st.Status.Terminal() || r.st.Status.Paused() }

// interrupted handles the end of the run's context: a person's cancel ends the run, the loop
// timeout exhausts it, and anything else (shutdown) saves it as it is for the next process.
func (r *runner) interrupted(ctx, wctx context.Context) error {
	if wctx.Err() == nil {
		return nil
	}
	switch cause := context.Cause(wctx); {
	case errors.Is(context.Cause(ctx), ErrCancelled):
		if err := r.st.Cancel("cancelled by a person", r.a.now()); err != nil {
			return nil
		}
		r.emit(Event{Kind: EventCancelled, Text: r.st.Summary()})
		return r.save(context.WithoutCancel(ctx))
	case errors.Is(cause, errLoopTimeout) && ctx.Err() == nil:
		return r.exhausted(ctx, "the wall-time budget is spent")
	default:
		if err := r.save(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		return fmt.Errorf("run %s interrupted: %w", r.st.RunID, context.Cause(ctx))
	}
}

// save brings the time accounting up to date and calls the checkpoint hook, after the save
// being written ahead, if any, is done: checkpoints are written in the order they were taken.
func (r *runner) save(ctx context.Context) error {
	if err := r.settle(); err != nil {
		return err
	}
	r.account()
	if r.h.Checkpoint == nil {
		return nil
	}
	if err := r.h.Checkpoint(ctx, r.st); err != nil {
		return fmt.Errorf("run %s: %w: %w", r.st.RunID, ErrCheckpoint, err)
	}
	return nil
}

// account brings the run's active time and UpdatedAt up to date, for a checkpoint.
func (r *runner) account() {
	now := r.a.now()
	r.st.Active += now.Sub(r.mark)
	r.mark = now
	r.st.UpdatedAt = now.UTC()
}

func (r *runner) emit(ev Event) {
	if r.h.Observer == nil {
		return
	}
	ev.RunID = r.st.RunID
	ev.Progress = r.st.Progress()
	ev.Progress.Elapsed = r.st.Active + r.a.now().Sub(r.mark)
	r.h.Observer.Observe(ev)
}

// pendingCalls reports whether the current step has calls whose outcome the model has not
// been told yet.
func (r *runner) pendingCalls() bool {
	for i := range r.st.Calls {
		if !r.st.Calls[i].Reported {
			return true
		}
	}
	return false
}

// step consults the model once and records what it asks for.
func (r *runner) step(ctx, wctx context.Context) error {
	st := r.st
	st.Step++
	r.emit(Event{Kind: EventStepStarted})

	prompt := r.prompt(wctx)
	r.promptTokens = estimateTokens(prompt)
	onText, streamed := r.streamText(ctx)
	reply, err := r.a.model.Complete(wctx, Request{Messages: prompt, Tools: r.specs(), OnText: onText})
	// The reply is used only once the step before it is saved: a run whose save was refused
	// goes on from that save, and asks the model again.
	if serr := r.settle(); serr != nil {
		return serr
	}
	if err != nil || len(reply.Message.ToolCalls) > 0 || strings.TrimSpace(reply.Message.Content) == "" {
		r.endText(ctx, streamed, err == nil)
	}
	if err != nil {
		if wctx.Err() != nil {
			st.Step--
			return nil // interrupted() decides what the end of the context means
		}
		r.a.log.Warn("model call failed", "run", st.RunID, "step", st.Step, "err", err)
		st.Step--
		return r.pause(ctx, Pause{Kind: PauseModelError, Reason: "The model could not be reached (" + safeError(err) + "). Continue to try again."})
	}
	st.Usage = st.Usage.Add(reply.Usage)
	msg := reply.Message
	msg.Role = RoleAssistant
	msg.Name, msg.ToolCallID = "", ""

	if len(msg.ToolCalls) == 0 {
		if strings.TrimSpace(msg.Content) == "" {
			return r.emptyReply(ctx)
		}
		st.Messages = append(st.Messages, msg)
		if asksQuestion(msg.Content) {
			// A reply that ends by asking the person something is not an answer: the run
			// waits for theirs.
			return r.pause(ctx, Pause{Kind: PauseQuestion, Reason: "The model asks a question.", Question: msg.Content})
		}
		return r.complete(ctx, msg.Content)
	}

	seen := make(map[string]bool, len(st.Calls))
	for _, c := range st.Calls {
		seen[c.ID] = true
	}
	grants := r.channelGrants(wctx)
	for i := range msg.ToolCalls {
		tc := &msg.ToolCalls[i]
		if tc.ID != "" && r.callPrefix != "" {
			tc.ID = r.callPrefix + tc.ID
		}
		if tc.ID == "" || seen[tc.ID] {
			tc.ID = fmt.Sprintf("%scall_%d_%d", r.callPrefix, st.Step, i)
			for seen[tc.ID] {
				tc.ID += "x"
			}
		}
		seen[tc.ID] = true
		if n := len(tc.Arguments); n > r.a.cfg.MaxArgBytes {
			// Refused before anything stores it: a 20 MB argument would otherwise be
			// checkpointed, and sent back in every later prompt, before the tool saw it.
			tc.Arguments = fmt.Sprintf(`{"dropped":"%d bytes of arguments, over the limit of %d"}`, n, r.a.cfg.MaxArgBytes)
			st.Calls = append(st.Calls, CallRecord{ID: tc.ID, Step: st.Step, Name: tc.Name, Arguments: tc.Arguments,
				ArgsHash: HashArgs(tc.Name, tc.Arguments), Status: CallInvalid,
				Error: fmt.Sprintf("the arguments of %s were %d bytes, over the limit of %d; send smaller arguments (write large content in parts)", tc.Name, n, r.a.cfg.MaxArgBytes)})
			continue
		}
		st.Calls = append(st.Calls, r.assess(*tc, grants))
	}
	st.Messages = append(st.Messages, msg)
	if r.onlyIdempotentReady() {
		// Nothing of this step needs to be on disk before its calls run: a crash before
		// the step's next checkpoint costs one model call again, never an effect twice.
		return nil
	}
	return r.save(ctx)
}

// onlyIdempotentReady reports whether every call of the current step is ready to run at once
// and is idempotent, so that the checkpoint after their results is the only one needed.
func (r *runner) onlyIdempotentReady() bool {
	for i := range r.st.Calls {
		c := &r.st.Calls[i]
		if c.Reported {
			continue
		}
		reg := r.a.tools[c.Name]
		if c.Status != CallReady || reg == nil || !reg.info.Idempotent {
			return false
		}
	}
	return true
}

// emptyReply handles a reply with neither text nor tool calls: it counts as a failure and the
// model is asked again.
func (r *runner) emptyReply(ctx context.Context) error {
	st := r.st
	st.Messages = append(st.Messages, Message{Role: RoleUser, Content: "Your last reply was empty. " + st.nextStep()})
	st.ConsecutiveFailures++
	if st.ConsecutiveFailures >= r.a.cfg.MaxConsecutiveFailures {
		return r.tooManyFailures(ctx)
	}
	return r.save(ctx)
}

// assess turns one tool call of the model into a record: invalid calls are answered at once,
// the rest are ready to run or wait for a person.
func (r *runner) assess(tc ToolCall, grants func() []Grant) CallRecord {
	st := r.st
	rec := CallRecord{
		ID:        tc.ID,
		Step:      st.Step,
		Name:      tc.Name,
		Arguments: tc.Arguments,
		ArgsHash:  HashArgs(tc.Name, tc.Arguments),
	}
	invalid := func(format string, args ...any) CallRecord {
		rec.Status = CallInvalid
		rec.Error = fmt.Sprintf(format, args...)
		return rec
	}
	reg, ok := r.a.tools[tc.Name]
	if !ok {
		return invalid("unknown tool %q; the tools you can call are: %s", tc.Name, strings.Join(r.a.toolNames(), ", "))
	}
	if !r.allowedTool(tc.Name) {
		return invalid("%s", r.notAllowed(tc.Name))
	}
	args, err := decodeArgs(tc.Arguments)
	if err != nil {
		return invalid("the arguments of %s are not a JSON object (%v); send them again as valid JSON", tc.Name, err)
	}
	if err := reg.schema.validate(args); err != nil {
		return invalid("the arguments of %s do not match its schema: %v", tc.Name, err)
	}
	if n := st.ToolFailures[tc.Name]; n >= r.a.cfg.MaxToolRetries {
		return invalid("%s failed %d times in a row, so it is not run again in this run; try another approach", tc.Name, n)
	}
	as := reg.tool.Assess(rawArgs(tc.Arguments))
	if floor, ok := r.a.cfg.RiskFloor[tc.Name]; ok && floor > as.Risk {
		as.Risk = floor
		as.Reason = strings.TrimSpace(as.Reason + " (" + r.a.cfg.floorReason(tc.Name, floor) + ")")
	}
	if as.Risk < RiskSafe || as.Risk > RiskDangerous {
		as.Risk = RiskConfirm
	}
	held := r.flowHolds(as)
	as, refuse := r.guardFlow(tc, as)
	if refuse != "" {
		return invalid("%s", refuse)
	}
	rec.Risk, rec.RiskReason, rec.Reads = as.Risk, as.Reason, as.Reads
	if tc.Name == askUserName || tc.Name == askPlannerName {
		rec.Status = CallAwaitingInput
		return rec
	}
	rec.Status, rec.RiskReason = r.approval(reg, as)
	r.applyGrant(&rec, rawArgs(tc.Arguments), held, grants)
	return rec
}

func (a *Agent) toolNames() []string {
	names := make([]string, 0, len(a.tools))
	for n := range a.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// finishStep carries the current step's calls to the end: it pauses for approvals, recovers
// calls a crash interrupted, runs what may run, reports outcomes to the model and applies the
// failure, stuck and sanity rules.
func (r *runner) finishStep(ctx, wctx context.Context) error {
	st := r.st
	if pending := st.PendingApprovals(); len(pending) > 0 {
		if st.Status != StatusAwaitingApproval {
			r.preview(ctx)
			pending = st.PendingApprovals()
			for i := range pending {
				r.emit(Event{Kind: EventApprovalRequested, Call: &pending[i]})
			}
		}
		return r.pause(ctx, Pause{Kind: PauseApproval, Reason: fmt.Sprintf("%d tool call(s) need approval", len(pending))})
	}
	r.recoverStarted()
	if err := r.execute(ctx, wctx); err != nil || wctx.Err() != nil {
		return err
	}
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Status == CallAwaitingInput {
			return r.pause(ctx, Pause{Kind: PauseAskUser, Reason: "The model has a question.", Question: askUserQuestion(c.Arguments), CallID: c.ID})
		}
	}
	failed := r.report()
	return r.afterStep(ctx, wctx, failed)
}

// recoverStarted settles calls that a previous process started but did not finish: an
// idempotent call runs again, any other is reported as having an unknown outcome.
func (r *runner) recoverStarted() {
	for i := range r.st.Calls {
		c := &r.st.Calls[i]
		if c.Status != CallStarted {
			continue
		}
		reg := r.a.tools[c.Name]
		if reg != nil && reg.info.Idempotent {
			c.Status = CallReady
			continue
		}
		c.Status = CallUnknown
		c.Error = "outcome unknown: loopbot stopped while this call was running and did not run it again because it is not idempotent; check its effects before repeating it"
		c.FinishedAt = r.a.now().UTC()
		r.emit(Event{Kind: EventToolFinished, Call: copyCall(c)})
	}
}

// execute runs the calls that are ready or approved, in the order the model asked for them.
// Consecutive read-only calls run together in parallel; any other call runs alone.
func (r *runner) execute(ctx, wctx context.Context) error {
	st := r.st
	var batch []int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := r.runBatch(ctx, wctx, batch)
		batch = batch[:0]
		return err
	}
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Reported || (c.Status != CallReady && c.Status != CallApproved) {
			continue
		}
		if r.a.tools[c.Name].info.ReadOnly {
			batch = append(batch, i)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := r.runBatch(ctx, wctx, []int{i}); err != nil {
			return err
		}
		if wctx.Err() != nil {
			return nil
		}
	}
	return flush()
}

type callResult struct {
	out   string
	err   error
	usage Usage // what the tool spent of the run's budget (ReportUsage)
}

// runBatch records the intent of the calls, runs them (in parallel when more than one), and
// records their outcomes. The state is saved around the calls only when one of them is not
// idempotent: an idempotent call that a crash interrupts is simply run again, so its intent
// and result need not hit the disk before the step's own checkpoint.
func (r *runner) runBatch(ctx, wctx context.Context, idx []int) error {
	st := r.st
	now := r.a.now().UTC()
	durable := false
	for _, i := range idx {
		c := &st.Calls[i]
		c.Status, c.StartedAt = CallStarted, now
		c.Attempts++
		if reg := r.a.tools[c.Name]; !reg.info.Idempotent {
			durable = true
		}
	}
	if durable {
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	for _, i := range idx {
		r.emit(Event{Kind: EventToolStarted, Call: copyCall(&st.Calls[i])})
	}

	results := make([]callResult, len(idx))
	if len(idx) == 1 {
		results[0] = r.invoke(wctx, st.Calls[idx[0]])
	} else {
		sem := make(chan struct{}, r.a.cfg.MaxParallel)
		var wg sync.WaitGroup
		for k, i := range idx {
			call := st.Calls[i]
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				results[k] = r.invoke(wctx, call)
			})
		}
		wg.Wait()
	}
	if wctx.Err() != nil {
		// Interrupted: the calls stay started, and recovery decides on resume.
		return nil
	}
	done := r.a.now().UTC()
	for k, i := range idx {
		c := &st.Calls[i]
		c.FinishedAt = done
		st.Usage = st.Usage.Add(results[k].usage)
		if err := results[k].err; err != nil {
			c.Status, c.Error, c.Output = CallFailed, err.Error(), results[k].out
		} else {
			c.Status, c.Output = CallSucceeded, results[k].out
		}
		r.exposeBy(c)
		r.emit(Event{Kind: EventToolFinished, Call: copyCall(c)})
	}
	if !durable {
		return nil
	}
	return r.save(ctx)
}

// report appends the step's outcomes to the conversation, in the order the model asked for
// the calls, and updates the failure counters. It returns how many calls failed.
func (r *runner) report() int {
	st := r.st
	failed := 0
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Reported || !c.Status.Done() {
			continue
		}
		c.Reported = true
		content := toolContent(c)
		if c.Name != readOutputName { // its replies are already bounded by the cap
			content = capOutput(content, r.a.outputCap(), c.ID)
		}
		st.Messages = append(st.Messages, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: content})
		r.noteOutcome(c)
		switch c.Status {
		case CallSucceeded:
			r.noteResult(c)
			st.ConsecutiveFailures = 0
			delete(st.ToolFailures, c.Name)
			st.RepeatedError = Streak{}
		case CallFailed, CallInvalid, CallUnknown:
			failed++
			st.ConsecutiveFailures++
			if st.ToolFailures == nil {
				st.ToolFailures = map[string]int{}
			}
			if c.Status != CallInvalid || r.a.tools[c.Name] != nil {
				st.ToolFailures[c.Name]++
			}
			st.RepeatedError.hit(c.Error)
		}
		if c.Name != updatePlanName {
			key := c.Name + "\x00" + canonicalArgs(c.Arguments)
			st.RepeatedCall.hit(key)
			st.Recent = append(st.Recent, key)
			if n := len(st.Recent); n > recentCalls {
				st.Recent = st.Recent[n-recentCalls:]
			}
		}
	}
	return failed
}

func toolContent(c *CallRecord) string {
	switch c.Status {
	case CallSucceeded:
		if c.Output == "" {
			return "(no output)"
		}
		return c.Output
	case CallRejected:
		return c.Output
	default:
		s := "Error: " + c.Error
		if c.Output != "" {
			s += "\n" + c.Output
		}
		return s
	}
}

// afterStep applies the rules that may stop or pause the run after a step.
func (r *runner) afterStep(ctx, wctx context.Context, failed int) error {
	st, cfg := r.st, r.a.cfg
	if st.ConsecutiveFailures >= cfg.MaxConsecutiveFailures {
		return r.tooManyFailures(ctx)
	}
	if st.RepeatedCall.Count >= cfg.StuckThreshold {
		return r.pause(ctx, Pause{Kind: PauseStuck, Reason: fmt.Sprintf("The same tool call was made %d times in a row; the run looks stuck.", st.RepeatedCall.Count)})
	}
	if cfg.NoProgressSteps > 0 && st.Step-st.ProgressAt >= cfg.NoProgressSteps {
		return r.pause(ctx, Pause{Kind: PauseStuck, Reason: fmt.Sprintf("No new result and no change of plan in %d steps; the run looks stuck.", st.Step-st.ProgressAt)})
	}
	if p := cycle(st.Recent, cfg.StuckThreshold); p > 0 {
		return r.pause(ctx, Pause{Kind: PauseStuck, Reason: fmt.Sprintf("The same %d tool calls were made in a cycle %d times; the run looks stuck.", p, cfg.StuckThreshold)})
	}
	if st.RepeatedError.Count >= cfg.StuckThreshold {
		return r.pause(ctx, Pause{Kind: PauseStuck, Reason: fmt.Sprintf("The same error came back %d times in a row; the run looks stuck.", st.RepeatedError.Count)})
	}
	if p := r.checkIn(); p != nil {
		return r.pause(ctx, *p)
	}
	if why := r.sanityTrigger(); r.a.sanity != nil && (why != "" || cfg.SanityEvery > 0 && st.Step-st.LastSanityStep >= cfg.SanityEvery || cfg.SanityAfterFailures && failed > 0) {
		if paused, err := r.sanityCheck(ctx, wctx, why); err != nil || paused {
			return err
		}
	}
	return r.saveAhead(ctx)
}

func (r *runner) tooManyFailures(ctx context.Context) error {
	st := r.st
	reason := count(st.ConsecutiveFailures, "tool call") + " failed in a row."
	if r.a.cfg.FailureHandling == FailureAbort {
		return r.fail(ctx, reason+"\n"+st.Summary())
	}
	return r.pause(ctx, Pause{Kind: PauseFailures, Reason: reason + "\n" + st.Summary()})
}

// pause leaves the run waiting for a person and saves it.
func (r *runner) pause(ctx context.Context, p Pause) error {
	st := r.st
	var err error
	if p.Kind == PauseApproval {
		err = st.AwaitApproval(p.Reason, r.a.now())
	} else {
		err = st.AwaitInput(p, r.a.now())
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", st.RunID, err)
	}
	r.emit(Event{Kind: EventPaused, Pause: st.Pause, Text: p.Reason})
	return r.save(ctx)
}

// complete ends the run with the model's final answer.
func (r *runner) complete(ctx context.Context, answer string) error {
	if err := r.st.Complete(answer, r.a.now()); err != nil {
		return fmt.Errorf("run %s: %w", r.st.RunID, err)
	}
	r.emit(Event{Kind: EventCompleted, Text: r.st.Answer})
	return r.save(ctx)
}

// fail ends the run because it cannot go on.
func (r *runner) fail(ctx context.Context, reason string) error {
	if err := r.st.Fail(reason, r.a.now()); err != nil {
		return fmt.Errorf("run %s: %w", r.st.RunID, err)
	}
	r.emit(Event{Kind: EventFailed, Text: r.st.Error})
	return r.save(ctx)
}

// exhaust ends the run at a spent budget with what it has to show.
func (r *runner) exhaust(ctx context.Context, reason, answer string) error {
	if err := r.st.Exhaust(reason, answer, r.a.now()); err != nil {
		return fmt.Errorf("run %s: %w", r.st.RunID, err)
	}
	r.emit(Event{Kind: EventBudgetExhausted, Text: r.st.Answer})
	return r.save(ctx)
}

// overBudget names the budget that is spent, if any.
func (r *runner) overBudget() string {
	cfg := r.a.cfg
	steps, usage, active := r.spent()
	switch {
	case steps >= cfg.MaxSteps:
		return fmt.Sprintf("the step budget (%d) is spent", cfg.MaxSteps)
	case cfg.MaxTokens > 0 && usage.Total() >= cfg.MaxTokens:
		return fmt.Sprintf("the token budget (%d) is spent", cfg.MaxTokens)
	case cfg.MaxCost > 0 && usage.Cost >= cfg.MaxCost:
		return fmt.Sprintf("the cost budget ($%.2f) is spent", cfg.MaxCost)
	case active >= time.Duration(cfg.MaxWall):
		return "the wall-time budget is spent"
	}
	return ""
}

// nearBudget names the budget that is nearly spent, if any: the next model call is the last
// one, and it is asked for a final answer.
func (r *runner) nearBudget() string {
	cfg := r.a.cfg
	steps, usage, active := r.spent()
	// A budget is near when its NearLimit share is used, or when one more step at the
	// average cost so far would pass it: the last call must fit inside the budget.
	near := func(used, limit float64) bool {
		if limit <= 0 {
			return false
		}
		if used >= cfg.NearLimit*limit {
			return true
		}
		return steps > 0 && used+used/float64(steps) > limit
	}
	switch {
	case steps+1 >= cfg.MaxSteps:
		return "the step budget is nearly spent"
	case near(float64(usage.Total()), float64(cfg.MaxTokens)):
		return "the token budget is nearly spent"
	case near(usage.Cost, cfg.MaxCost):
		return "the cost budget is nearly spent"
	case near(float64(active), float64(cfg.MaxWall)):
		return "the wall-time budget is nearly spent"
	}
	return ""
}

// finalAnswer makes the one last model call without tools and ends the run with what it
// says, followed by the loop's own account of what was and was not done.
func (r *runner) finalAnswer(ctx, wctx context.Context, reason string) error {
	st := r.st
	if st.FinalAsked {
		return r.exhausted(ctx, reason)
	}
	st.FinalAsked = true
	st.BudgetWarned = true
	r.emit(Event{Kind: EventBudgetWarning, Text: reason})
	st.Step++
	prompt := append(r.prompt(wctx), Message{Role: RoleUser, Content: "The budget for this run is nearly spent (" + reason +
		"). Do not call tools. Reply now with your final answer: what was done, what was not, and what is left to do."})
	onText, streamed := r.streamText(ctx)
	reply, err := r.a.model.Complete(wctx, Request{Messages: prompt, OnText: onText})
	if err != nil || strings.TrimSpace(reply.Message.Content) == "" {
		r.endText(ctx, streamed, false)
	}
	if err != nil {
		if wctx.Err() != nil {
			st.Step--
			return nil
		}
		r.a.log.Warn("final answer call failed", "run", st.RunID, "err", err)
		return r.exhausted(ctx, reason)
	}
	st.Usage = st.Usage.Add(reply.Usage)
	answer := strings.TrimSpace(reply.Message.Content)
	if answer != "" {
		st.Messages = append(st.Messages, Message{Role: RoleAssistant, Content: answer})
	}
	return r.exhaust(ctx, "Stopped: "+reason+".", joinNonEmpty(answer, st.Summary()))
}

// exhausted ends the run at a spent budget without another model call.
func (r *runner) exhausted(ctx context.Context, reason string) error {
	return r.exhaust(ctx, "Stopped: "+reason+".", joinNonEmpty(r.st.Answer, r.st.Summary()))
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n\n")
}

func copyCall(c *CallRecord) *CallRecord {
	cc := *c
	return &cc
}

// safeError shortens an error for a message a person sees; the full error goes to the log.
func safeError(err error) string {
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return "rate limited"
	}
	// The model client's errors say what failed and what to check (agent/llm/errkind.go).
	var explained interface{ SafeSummary() string }
	if errors.As(err, &explained) {
		return explained.SafeSummary()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return "request failed"
}
