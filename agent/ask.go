package agent

import (
	"context"
	"errors"
)

// A tool may need a person's answer in the middle of a call: an MCP server that elicits
// input. It asks with Ask on the context of its call, and the call blocks until the person
// answers in the run's thread, declines, or the question is closed (the call's context ended,
// or the question expired). The bot posts the question and routes the answer through
// Hooks.Ask. The call is not durable: a restart while it waits loses it like any call in
// flight, and the loop reports its outcome as unknown when the run resumes.

// Question is what a tool asks the person whose run called it. Its text comes from outside
// loopbot (an MCP server); the bot shows it as such.
type Question struct {
	// From names who asks, for the person: "MCP server docs".
	From string
	Text string
	// Options are the answers to choose from, each a button; with none the answer is a
	// reply in words.
	Options []string
	// Optional lets the person skip the question (AnswerSkipped).
	Optional bool
}

// AnswerKind says how a question was answered.
type AnswerKind string

// How a question ends.
const (
	// AnswerGiven: the person answered with Text.
	AnswerGiven AnswerKind = "answer"
	// AnswerSkipped: the person skipped an optional question.
	AnswerSkipped AnswerKind = "skip"
	// AnswerDeclined: the person declined to answer.
	AnswerDeclined AnswerKind = "decline"
	// AnswerCancelled: nobody answered before the question expired or the run stopped.
	AnswerCancelled AnswerKind = "cancel"
)

// Answer is how a person answered a Question.
type Answer struct {
	Kind AnswerKind
	// Text is the answer for AnswerGiven: an option's text, or the person's words.
	Text string
	// By names who answered.
	By string
}

// ErrNoAsk is returned by Ask when nobody can be asked: the call was not made by a run
// whose bot relays questions.
var ErrNoAsk = errors.New("no person can be asked during this call")

type askKey struct{}

// asker is what the loop puts on the context of a call: the hook and the call it serves.
type asker struct {
	fn          func(ctx context.Context, runID, callID string, q Question) (Answer, error)
	runID, call string
}

// WithAsk returns ctx with fn as the way to ask about call callID of run runID: the loop puts
// Hooks.Ask on the context of every call with it, and a test of a tool can put its own.
func WithAsk(ctx context.Context, runID, callID string, fn func(ctx context.Context, runID, callID string, q Question) (Answer, error)) context.Context {
	return context.WithValue(ctx, askKey{}, asker{fn: fn, runID: runID, call: callID})
}

// Ask asks the person whose run made the call of ctx, and waits for the reply. It returns
// ErrNoAsk outside a call, or when the bot relays no questions.
func Ask(ctx context.Context, q Question) (Answer, error) {
	a, ok := ctx.Value(askKey{}).(asker)
	if !ok || a.fn == nil {
		return Answer{}, ErrNoAsk
	}
	return a.fn(ctx, a.runID, a.call, q)
}
