package llm

import "github.com/loopbot/loopbot/agent"

// textRelay passes the text of a streamed reply on to the request's OnText as it arrives.
// Only the content of the first choice goes out: tool-call arguments, refusals and the
// reasoning some providers stream beside the content are not the answer's text.
type textRelay struct {
	onText func(agent.TextDelta)
	// sent is set once text of the current attempt went out, so that a retry first says
	// that text is void.
	sent bool
}

// restart begins an attempt: text an earlier attempt sent is void, and the retry will
// send its own.
func (t *textRelay) restart() {
	if t.onText != nil && t.sent {
		t.onText(agent.TextDelta{Reset: true})
	}
	t.sent = false
}

// send passes on the text of one chunk.
func (t *textRelay) send(ck chunk) {
	if t.onText == nil {
		return
	}
	for _, ch := range ck.Choices {
		if ch.Index != 0 || ch.Delta.Content == "" {
			continue
		}
		t.sent = true
		t.onText(agent.TextDelta{Text: ch.Delta.Content})
	}
}
