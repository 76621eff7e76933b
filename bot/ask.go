package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
)

// A tool may ask the person whose run called it a question in the middle of the call (an
// MCP server eliciting input, agent.Ask). The call blocks meanwhile, so the question lives
// in two places: durably on the thread's conversation (Conversation.Asking, which a reply or
// a click finds and the question card is rendered from), and in memory as the channel the
// blocked call waits on (questions). A reply or click answers the question only while both
// exist. After a restart only the stored half is left: the call that asked died with the
// process (the run resumes and the loop reports that call's outcome as unknown), so the
// stored question is stale, and the first reply or click that finds it closes it and is
// handled as if no question waited.
//
// Replicas that share a store (lease.go) each receive some of a thread's replies and clicks:
// Slack spreads Socket Mode events over their connections. A question records the lease
// under which its call asked (Owner, Epoch); another replica that receives the answer takes
// it while that lease is still the run's and live, which says the call still waits there.
// It closes the question with the answer kept on it (Reply) in the same transaction and
// notifies the asking replica (channelAnswer), whose call takes the answer from the store
// and clears its text. The notification is a hint: the waiting call also looks at the store
// every askPoll, so a lost one delays the answer and loses nothing.

// PendingQuestion is a tool's question waiting in a thread.
type PendingQuestion struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	CallID string `json:"call_id"`
	// From names who asks ("MCP server docs"); Text is their question, outside content.
	From    string           `json:"from"`
	Text    string           `json:"text"`
	Options []QuestionOption `json:"options,omitempty"`
	// SkipAction is set for an optional question; DeclineAction always.
	SkipAction    string    `json:"skip_action,omitempty"`
	DeclineAction string    `json:"decline_action"`
	AskedAt       time.Time `json:"asked_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	// Card is the question's card once posted, so that closing the question edits it.
	Card MessageRef `json:"card,omitzero"`
	// Outcome says how a closed question ended, for its card.
	Outcome string `json:"outcome,omitempty"`
	// Owner and Epoch are the run's lease under which its call asked: the replica whose
	// memory the call waits in. Empty on a store without leases.
	Owner string `json:"owner,omitempty"`
	Epoch int64  `json:"epoch,omitempty"`
	// Reply is the answer of a closed question until the call that asked took it.
	Reply *QuestionReply `json:"reply,omitempty"`
}

// QuestionReply is how a question was answered, kept on it for its call.
type QuestionReply struct {
	Kind agent.AnswerKind `json:"kind"`
	// Text is kept only for a call that waits on another replica, and only until it took
	// it: what a person typed may be what a server asked them to keep private.
	Text string `json:"text,omitempty"`
	By   string `json:"by,omitempty"`
	// InMemory says that the replica which took the answer was the one the call waits
	// on, and handed it over in memory, so the store holds nothing to take.
	InMemory bool `json:"in_memory,omitempty"`
}

func (r *QuestionReply) answer() agent.Answer {
	return agent.Answer{Kind: r.Kind, Text: r.Text, By: r.By}
}

// maxClosedQuestions bounds Conversation.Asked: the latest closed questions are kept so that
// their cards' edits, which may wait in the outbox, still find them.
const maxClosedQuestions = 8

// closeQuestion ends conv's question q with outcome: it is kept among the closed ones and
// its card is edited to say how it ended, without its buttons. The caller stores conv.
func (b *Bot) closeQuestion(tx Tx, conv *Conversation, q *PendingQuestion, outcome string) error {
	q.Outcome = outcome
	if conv.Asking != nil && conv.Asking.ID == q.ID {
		conv.Asking = nil
	}
	conv.Asked = append(conv.Asked, q)
	if n := len(conv.Asked); n > maxClosedQuestions {
		conv.Asked = conv.Asked[n-maxClosedQuestions:]
	}
	if err := b.markAsking(tx, q.RunID, ""); err != nil {
		return err
	}
	return b.recs.put(tx, conv.Thread, b.clock.stamp(), askItem(q))
}

// findQuestion is the question id of conv, waiting or closed.
func findQuestion(conv *Conversation, id string) *PendingQuestion {
	if conv.Asking != nil && conv.Asking.ID == id {
		return conv.Asking
	}
	for _, q := range conv.Asked {
		if q.ID == id {
			return q
		}
	}
	return nil
}

// QuestionOption is one answer to choose, with the opaque ID of its button.
type QuestionOption struct {
	Action string `json:"action"`
	Label  string `json:"label"`
}

// What a person answering a tool's question is told.
const (
	noticeChooseOption = "Choose one of the buttons, or reply with one of: "
	noticeQuestionGone = "This question is closed: loopbot restarted while it waited, and the call that asked it did not survive."
	noticeQuestionLate = "This question has expired."
)

// maxQuestionOptions bounds the buttons of a question: with Skip and Decline they fit one
// Slack actions block and Discord's five rows. A question with more options is answered in
// words, checked against them.
const maxQuestionOptions = 20

func askItem(q *PendingQuestion) OutboxItem {
	return OutboxItem{Key: "ask/" + q.ID, Kind: OutboxAsk, RunID: q.RunID}
}

// questions are the tool calls blocked on a question, by question ID. Its lock guards only
// the map.
type questions struct {
	mu      sync.Mutex
	waiting map[string]*waiter
}

// waiter is one call blocked on a question: answer receives an answer taken on this
// replica; check is poked when another replica may have stored one.
type waiter struct {
	answer chan agent.Answer
	check  chan struct{}
}

func (q *questions) wait(id string) *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting == nil {
		q.waiting = map[string]*waiter{}
	}
	w := &waiter{answer: make(chan agent.Answer, 1), check: make(chan struct{}, 1)}
	q.waiting[id] = w
	return w
}

// check tells the call waiting on question id, or with id "" every waiting call, to look
// for an answer in the store.
func (q *questions) check(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for qid, w := range q.waiting {
		if id == "" || qid == id {
			poke(w.check)
		}
	}
}

func (q *questions) done(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.waiting, id)
}

// live reports whether a call still waits on question id.
func (q *questions) live(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.waiting[id]
	return ok
}

// deliver hands a committed answer to the call waiting on question id, and reports
// whether one waits here.
func (q *questions) deliver(id string, a agent.Answer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.waiting[id]
	if ok {
		select {
		case w.answer <- a:
		default: // answered once already
		}
	}
	return ok
}

// answered hands the answer just committed for question id to its call: in memory when it
// waits here, else through the store's notifications to the replica it waits on.
func (b *Bot) answered(ctx context.Context, id string, a agent.Answer) {
	if b.asks.deliver(id, a) || b.notes.n == nil {
		return
	}
	if err := b.notes.n.Notify(ctx, channelAnswer, id); err != nil {
		b.log.Warn("notify an answer; the asking replica finds it at its next look", "question", id, "err", err)
	}
}

// askPoll is how often a call whose question may be answered on another replica looks at
// the store unasked: a third of the lease, as the heartbeat, since the notification that
// usually wakes it may be lost.
func (b *Bot) askPoll() time.Duration {
	return max(time.Duration(b.cfg.LeaseTTL)/3, time.Second)
}

// askGrace bounds the wait for an answer this replica committed and is about to hand over
// in memory, once the question is found closed with it.
const askGrace = 5 * time.Second

// ask is agent.Hooks.Ask: it stores the question on the run's conversation, posts it, and
// waits for the answer until the question expires (the policy's approval expiry, or sooner
// the call's own deadline) or the call's context ends. A thread has one question at a time:
// only a run's calls ask, and those that may ask (MCP tools) are not read-only, so the loop
// never runs two of them at once.
func (b *Bot) ask(ctx context.Context, runID, callID string, q agent.Question) (agent.Answer, error) {
	id := b.newID()
	wait := time.Duration(b.cfg.Policy.ApprovalExpiry)
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	w := b.asks.wait(id)
	defer b.asks.done(id)
	held := b.sched.heldLease(runID)
	var pq *PendingQuestion
	var thread ThreadRef
	// Fenced by the run's lease (lease.go), as its checkpoints are: a replica the run was
	// taken from asks nothing more.
	err := b.sched.write(ctx, runID, func(tx Tx) error {
		pq = nil
		rec, err := tx.RunHeader(runID)
		if err != nil {
			return err
		}
		thread = rec.Thread
		conv, err := tx.Conversation(rec.Thread)
		if err != nil {
			return err
		}
		now := b.clock.stamp()
		pq = &PendingQuestion{ID: id, RunID: runID, CallID: callID, From: q.From, Text: q.Text,
			DeclineAction: b.newID(), AskedAt: now, ExpiresAt: now.Add(wait), Owner: held.Owner, Epoch: held.Epoch}
		actions := []*Action{{ID: pq.DeclineAction, Kind: ActionDecline, RunID: runID, Question: id}}
		if len(q.Options) <= maxQuestionOptions {
			for _, o := range q.Options {
				opt := QuestionOption{Action: b.newID(), Label: o}
				pq.Options = append(pq.Options, opt)
				actions = append(actions, &Action{ID: opt.Action, Kind: ActionAnswer, RunID: runID, Question: id, Answer: o})
			}
		}
		if q.Optional {
			pq.SkipAction = b.newID()
			actions = append(actions, &Action{ID: pq.SkipAction, Kind: ActionSkip, RunID: runID, Question: id})
		}
		for _, a := range actions {
			if err := tx.PutAction(a); err != nil {
				return err
			}
		}
		conv.Asking = pq
		if err := tx.PutConversation(conv); err != nil {
			return err
		}
		if err := b.markAsking(tx, runID, q.From); err != nil {
			return err
		}
		return b.recs.put(tx, rec.Thread, now, askItem(pq))
	})
	if err != nil {
		return agent.Answer{}, fmt.Errorf("ask the thread: %w", err)
	}
	b.outboxChanged()
	b.log.Info("question asked", "run", runID, "call", callID, "question", id, "from", q.From, "expires", pq.ExpiresAt)

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var poll <-chan time.Time
	if held.Owner != "" {
		// Another replica may take the answer (the file's comment).
		tick := time.NewTicker(b.askPoll())
		defer tick.Stop()
		poll = tick.C
	}
	closing := "it was not answered within " + shortDuration(wait)
waiting:
	for {
		select {
		case a := <-w.answer:
			return a, nil
		case <-w.check:
		case <-poll:
		case <-timer.C:
			break waiting
		case <-ctx.Done():
			closing = "the call that asked it ended"
			if errors.Is(context.Cause(ctx), agent.ErrCancelled) {
				closing = "the run was cancelled"
			}
			break waiting
		}
		if a, ok := b.takeAnswer(ctx, runID, thread, id); ok {
			return a, nil
		}
	}
	// Closed without an answer, unless one was committed meanwhile: the store decides.
	var answered bool
	var reply *QuestionReply
	err = b.store.Update(context.WithoutCancel(ctx), func(tx Tx) error {
		answered, reply = false, nil
		conv, err := tx.Conversation(thread)
		if err != nil {
			return err
		}
		if conv.Asking == nil || conv.Asking.ID != id {
			answered = true
			reply, err = takeReply(tx, conv, id)
			return err
		}
		if err := b.closeQuestion(tx, conv, conv.Asking, "Closed: "+closing+"."); err != nil {
			return err
		}
		if err := tx.PutConversation(conv); err != nil {
			return err
		}
		text := fmt.Sprintf("The question from %s is closed: %s. The run goes on without an answer.", q.From, closing)
		return b.recs.put(tx, conv.Thread, b.clock.stamp(), noticeItem(runID, b.newID(), text))
	})
	if err != nil {
		b.log.Error("close a question", "question", id, "err", err)
	}
	b.outboxChanged()
	switch {
	case err == nil && reply != nil && !reply.InMemory:
		return reply.answer(), nil
	case answered:
		// Taken here: the answer is on its way in memory.
		grace := time.NewTimer(askGrace)
		defer grace.Stop()
		select {
		case a := <-w.answer:
			return a, nil
		case <-grace.C:
		}
	}
	b.log.Info("question closed unanswered", "run", runID, "question", id, "why", closing)
	return agent.Answer{Kind: agent.AnswerCancelled}, nil
}

// takeAnswer looks in the store for an answer to question id that another replica took,
// and reports whether the wait is over: with that answer, or cancelled when the question
// was closed without one (another replica found the run taken from this one).
func (b *Bot) takeAnswer(ctx context.Context, runID string, thread ThreadRef, id string) (agent.Answer, bool) {
	var reply *QuestionReply
	var closed bool
	// Fenced as the question was asked: a replica the run was taken from takes nothing.
	err := b.sched.write(ctx, runID, func(tx Tx) error {
		reply, closed = nil, false
		conv, err := tx.Conversation(thread)
		if err != nil {
			return err
		}
		if conv.Asking != nil && conv.Asking.ID == id {
			return nil
		}
		closed = true
		reply, err = takeReply(tx, conv, id)
		return err
	})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			b.log.Warn("look for an answer", "question", id, "err", err)
		}
		return agent.Answer{}, false
	case !closed || reply != nil && reply.InMemory:
		// Still waiting, or answered here and on its way in memory.
		return agent.Answer{}, false
	case reply == nil:
		b.log.Info("question closed elsewhere unanswered", "run", runID, "question", id)
		return agent.Answer{Kind: agent.AnswerCancelled}, true
	}
	b.log.Info("answer taken from another replica", "run", runID, "question", id)
	return reply.answer(), true
}

// takeReply returns the reply of closed question id of conv and, unless it was handed
// over in memory, removes it from the store: its text is not kept once its call has it.
func takeReply(tx Tx, conv *Conversation, id string) (*QuestionReply, error) {
	q := findQuestion(conv, id)
	if q == nil || q.Reply == nil {
		return nil, nil
	}
	r := *q.Reply
	if r.InMemory {
		return &r, nil
	}
	q.Reply = nil
	return &r, tx.PutConversation(conv)
}

// pendingQuestion returns the question waiting in conv, if a call still waits on it, here
// or on another replica. Otherwise notice says why the stored question answers nothing: a
// stale one (its call died with an earlier process, or the run was taken from the replica
// that asked) is closed and conv stored without it; one that expired on another replica is
// left for that replica's call to close.
func (b *Bot) pendingQuestion(tx Tx, conv *Conversation) (q *PendingQuestion, notice string, err error) {
	q = conv.Asking
	if q == nil {
		return nil, "", nil
	}
	if b.asks.live(q.ID) {
		return q, "", nil
	}
	waits, err := b.waitsElsewhere(tx, q)
	switch {
	case err != nil:
		return nil, "", err
	case waits && !b.clock.Now().Before(q.ExpiresAt):
		return nil, noticeQuestionLate, nil
	case waits:
		return q, "", nil
	}
	b.log.Info("stale question closed", "question", q.ID, "run", q.RunID, "asked_by", q.Owner)
	if err := b.closeQuestion(tx, conv, q, "Closed: loopbot restarted while it waited."); err != nil {
		return nil, "", err
	}
	return nil, noticeQuestionGone, tx.PutConversation(conv)
}

// waitsElsewhere reports whether q's call still waits on the replica that asked it: q was
// asked under another replica's lease, and that lease is still the run's and live. A
// question this replica asked under its ID, which no call here waits on, was asked by an
// earlier process of the same ID.
func (b *Bot) waitsElsewhere(tx Tx, q *PendingQuestion) (bool, error) {
	if q.Owner == "" || q.Owner == b.notes.owner {
		return false, nil
	}
	l, err := tx.RunLease(q.RunID)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return l.Owner == q.Owner && l.Epoch == q.Epoch && l.Live(b.clock.Now()), nil
}

// markAsking notes on run id's record who asks the question its call waits on ("" once
// none does), and refreshes its status card, which says so.
func (b *Bot) markAsking(tx Tx, id, from string) error {
	rec, err := tx.RunHeader(id)
	if err != nil {
		return err
	}
	rec.Asking = from
	if err := tx.PutRunHead(rec); err != nil {
		return err
	}
	return b.recs.put(tx, rec.Thread, b.clock.stamp(), cardItem(id))
}

// answerWith checks a reply in words against the question's options: with options, it must
// name one (case aside), and the option's own text is the answer. notice says why not.
func (q *PendingQuestion) answerWith(text string) (answer, notice string) {
	if len(q.Options) == 0 {
		return text, ""
	}
	labels := make([]string, len(q.Options))
	for i, o := range q.Options {
		if strings.EqualFold(strings.TrimSpace(text), o.Label) {
			return o.Label, ""
		}
		labels[i] = o.Label
	}
	return "", noticeChooseOption + strings.Join(labels, ", ") + "."
}

// answerQuestion closes conv's question q as who answered it, with an audit entry, and
// returns the answer for the waiting call. The caller stores nothing else for it.
func (b *Bot) answerQuestion(tx Tx, conv *Conversation, q *PendingQuestion, who User, kind agent.AnswerKind, text string) (agent.Answer, error) {
	name := displayName(who)
	outcome := "Answered by " + name + "."
	switch {
	case kind == agent.AnswerSkipped:
		outcome = "Skipped by " + name + "."
	case kind == agent.AnswerDeclined:
		outcome = "Declined by " + name + "."
	case len(q.Options) > 0:
		outcome = text + ": chosen by " + name + "."
	}
	a := agent.Answer{Kind: kind, Text: text, By: name}
	q.Reply = &QuestionReply{Kind: kind, Text: text, By: name}
	if b.asks.live(q.ID) {
		q.Reply = &QuestionReply{Kind: kind, By: name, InMemory: true}
	}
	if err := b.closeQuestion(tx, conv, q, outcome); err != nil {
		return agent.Answer{}, err
	}
	if err := tx.PutConversation(conv); err != nil {
		return agent.Answer{}, err
	}
	// A chosen option is the server's own word; what a person typed may be anything they
	// were asked for, so the log keeps only its length.
	detail := text
	if kind == agent.AnswerGiven && len(q.Options) == 0 {
		detail = fmt.Sprintf("a reply of %d characters", utf8.RuneCountInString(text))
	}
	err := tx.AppendAudit(AuditEntry{At: b.clock.stamp(), Actor: who, Action: "question " + string(kind), RunID: q.RunID, CallID: q.CallID, Detail: clip(detail, 200)})
	return a, err
}

// answerClick answers a question with one of its buttons: an option, Skip or Decline.
func (b *Bot) answerClick(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	res := Result{RunID: act.RunID}
	var answer agent.Answer
	var answered string
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice, answered = "", ""
		rec, err := tx.RunHeader(act.RunID)
		if err != nil {
			return err
		}
		if !fromThread(from, rec.Thread) {
			b.log.Warn("answer from another thread refused", "run", rec.ID, "user", who.ID, "from", from.Key(), "thread", rec.Thread.Key())
			res.Notice = noticeOtherThread
			return nil
		}
		conv, err := tx.Conversation(rec.Thread)
		if err != nil {
			return err
		}
		stored := conv.Asking != nil && conv.Asking.ID == act.Question
		q, gone, err := b.pendingQuestion(tx, conv)
		switch {
		case err != nil:
			return err
		case stored && q == nil:
			res.Notice = gone
			return nil
		case q == nil || q.ID != act.Question:
			res.Notice = noticeNotWaiting
			return nil
		case !b.cfg.Policy.mayControl(rec, who):
			res.Notice = noticeNoControl
			return nil
		}
		kind := map[ActionKind]agent.AnswerKind{ActionAnswer: agent.AnswerGiven, ActionSkip: agent.AnswerSkipped, ActionDecline: agent.AnswerDeclined}[act.Kind]
		answer, err = b.answerQuestion(tx, conv, q, who, kind, act.Answer)
		if err != nil {
			return err
		}
		answered = q.ID
		return nil
	})
	if err == nil && answered != "" {
		b.answered(ctx, answered, answer)
	}
	return res, err
}

// askMessage is the card of a tool's question, from the conversation as it is now: with its
// buttons while it waits, with how it ended once closed.
func askMessage(tx Tx, it OutboxItem) (Message, error) {
	conv, err := tx.Conversation(it.Thread)
	if err != nil {
		return Message{}, fmt.Errorf("load conversation of %s: %w", it.Key, err)
	}
	q := findQuestion(conv, strings.TrimPrefix(it.Key, "ask/"))
	if q == nil {
		return Message{Kind: KindNotice, Text: "A question for this thread was closed before it could be shown."}, nil
	}
	m := Message{Kind: KindQuestion, Title: "Question from " + q.From, Text: q.Text}
	if q.Outcome != "" {
		m.Footer = q.Outcome
		return m, nil
	}
	for _, o := range q.Options {
		m.Buttons = append(m.Buttons, Button{ID: o.Action, Label: o.Label})
	}
	if q.SkipAction != "" {
		m.Buttons = append(m.Buttons, Button{ID: q.SkipAction, Label: "Skip"})
	}
	m.Buttons = append(m.Buttons, Button{ID: q.DeclineAction, Label: "Decline", Style: StyleDanger})
	until := " by " + q.ExpiresAt.UTC().Format("15:04 UTC")
	switch {
	case len(q.Options) > 0:
		m.Footer = "Choose an answer" + until + ", or:"
	default:
		m.Footer = "Reply in this thread to answer" + until + ", or:"
	}
	return m, nil
}

// questionCard is the posted card of the question of item it, if any.
func questionCard(tx Tx, it OutboxItem) (MessageRef, error) {
	conv, err := tx.Conversation(it.Thread)
	if err != nil {
		return MessageRef{}, err
	}
	if q := findQuestion(conv, strings.TrimPrefix(it.Key, "ask/")); q != nil {
		return q.Card, nil
	}
	return MessageRef{}, nil
}

// saveQuestionCard keeps the reference of a question's newly posted card.
func saveQuestionCard(tx Tx, it OutboxItem, ref MessageRef) error {
	conv, err := tx.Conversation(it.Thread)
	if err != nil {
		return err
	}
	q := findQuestion(conv, strings.TrimPrefix(it.Key, "ask/"))
	if q == nil {
		return nil
	}
	q.Card = ref
	return tx.PutConversation(conv)
}
