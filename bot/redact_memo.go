package bot

import "sync"

// Remembering what the parts of outgoing messages redact to.
//
// The dispatcher redacts every message it sends, field by field, and a status card is sent
// again at every change of its run, with the steps it showed before: each step's arguments
// and result, the title, the buttons' labels. Redaction is a pure function of the text (a
// Redactor's secrets are fixed when it is made, and the rules are the same for all), so the
// outcome for a short text seen recently is looked up instead of scanned again: a tenth of
// the bot's CPU in the makespan scenario went to redacting cards, most of it the same texts.

// memoTexts is how many texts a Redactor remembers, and memoTextLen the longest it
// remembers: long texts are few and mostly new (answers), and the memo must stay small
// when the bot idles after a burst. When full it starts afresh.
const (
	memoTexts   = 512
	memoTextLen = 1024
)

// redactMemo maps a text to what it redacts to.
type redactMemo struct {
	mu sync.Mutex
	m  map[string]string
}

// redactMemoized is Redact through the Redactor's memo.
func (r *Redactor) redactMemoized(s string) string {
	if len(s) > memoTextLen || s == "" {
		return r.Redact(s)
	}
	r.memo.mu.Lock()
	out, ok := r.memo.m[s]
	r.memo.mu.Unlock()
	if ok {
		return out
	}
	out = r.Redact(s)
	r.memo.mu.Lock()
	if r.memo.m == nil || len(r.memo.m) >= memoTexts {
		r.memo.m = make(map[string]string, memoTexts)
	}
	r.memo.m[s] = out
	r.memo.mu.Unlock()
	return out
}
