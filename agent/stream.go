package agent

import "context"

// The answer can be shown as the model writes it. A Model that streams calls
// Request.OnText with each piece of text of its reply; the loop passes the pieces of the
// executor's replies on through Hooks.Text. Streamed text is a preview and nothing more:
// the answer that counts is the one the run completes with, which the bot posts durably.
// Only the text of a reply is streamed, never a tool call's arguments or a model's
// reasoning.

// TextDelta is a piece of a model's reply as it is written.
type TextDelta struct {
	// Text is what the reply adds.
	Text string `json:"text,omitempty"`
	// Reset says the text since the last reset is not the answer: the model went on to call
	// tools (it was narrating), or the reply failed, or it is being asked again after a
	// failed attempt, whose text will come again.
	Reset bool `json:"reset,omitempty"`
	// Whole is set with Reset when the text since the last reset was a whole reply (the
	// model went on to call tools): nothing of it was cut short, so all of it may be shown
	// as the model's narration.
	Whole bool `json:"whole,omitempty"`
}

// streamText returns the callback that passes the executor's text on to Hooks.Text, and a
// function that reports whether any text went out since the last reset; both are nil
// when nobody listens.
func (r *runner) streamText(ctx context.Context) (onText func(TextDelta), streamed func() bool) {
	if r.h.Text == nil {
		return nil, nil
	}
	var any bool
	onText = func(d TextDelta) {
		switch {
		case d.Reset:
			any = false
		case d.Text == "":
			return
		default:
			any = true
		}
		r.h.Text(ctx, d)
	}
	return onText, func() bool { return any }
}

// endText tells the listener that the text streamed during the step is not the answer:
// the reply called tools (whole), failed, or was empty. A reply that is the answer needs
// nothing: the run completes with it.
func (r *runner) endText(ctx context.Context, streamed func() bool, whole bool) {
	if streamed != nil && streamed() {
		r.h.Text(ctx, TextDelta{Reset: true, Whole: whole})
	}
}
