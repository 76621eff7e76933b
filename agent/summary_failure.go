package agent

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// count writes n things as people do: "1 step", "3 steps".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// maxFailureShown bounds the error a summary quotes: enough for a message, not a dump.
const maxFailureShown = 300

// lastFailure names the run's latest failed call and its error, for the summaries that
// tell a person why a run stopped or paused: "3 calls failed" alone does not say which
// tool or what went wrong. It is "" when no call failed.
func (st *State) lastFailure() string {
	for i := len(st.Calls) - 1; i >= 0; i-- {
		c := st.Calls[i]
		if c.Status != CallFailed && c.Status != CallInvalid && c.Status != CallUnknown {
			continue
		}
		msg := strings.Join(strings.Fields(c.Error), " ")
		if msg == "" {
			msg = "no error message"
		}
		if len(msg) > maxFailureShown {
			cut := maxFailureShown
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
		return "Last failure: " + c.Name + ": " + strings.TrimSuffix(msg, ".") + "."
	}
	return ""
}
