package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// recentCalls is how many call keys State.Recent keeps: enough for a cycle of three calls
// seen four times.
const recentCalls = 12

// cycle reports the period (2 or 3) of a cycle of calls that the latest calls repeat times
// times in a row (A B A B A B for period 2 and times 3), or 0. A run repeating one call is
// caught by State.RepeatedCall; a run going round two or three calls is just as stuck.
func cycle(recent []string, times int) int {
	for p := 2; p <= 3; p++ {
		n := p * times
		if times < 2 || len(recent) < n {
			continue
		}
		tail := recent[len(recent)-n:]
		same := true
		for i := p; i < n && same; i++ {
			same = tail[i] == tail[i-p]
		}
		// A B A B with A == B is a plain repeat, which RepeatedCall reports.
		distinct := false
		for i := 1; i < p; i++ {
			distinct = distinct || tail[i] != tail[0]
		}
		if same && distinct {
			return p
		}
	}
	return 0
}

// asksQuestion reports whether a final reply ends by asking the person something: its last
// line, Markdown emphasis aside, ends with a question mark.
func asksQuestion(text string) bool {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	last := strings.TrimRight(strings.TrimSpace(lines[len(lines)-1]), "*_`~ )\"'")
	return strings.HasSuffix(last, "?")
}

// outputsKept is how many result hashes State.Outputs keeps.
const outputsKept = 64

// noteResult records a successful call's result and moves ProgressAt when the run has not
// seen it before: the same listing read again, or the same plan sent again, is no progress.
func (r *runner) noteResult(c *CallRecord) {
	st := r.st
	sum := sha256.Sum256([]byte(c.Name + "\x00" + c.Output))
	h := hex.EncodeToString(sum[:8])
	if slices.Contains(st.Outputs, h) {
		return
	}
	st.ProgressAt = st.Step
	st.Outputs = append(st.Outputs, h)
	if n := len(st.Outputs); n > outputsKept {
		st.Outputs = st.Outputs[n-outputsKept:]
	}
}
