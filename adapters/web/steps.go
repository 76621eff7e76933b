package web

import (
	"strconv"
	"strings"

	"github.com/loopbot/loopbot/bot"
)

// stepMark draws each step status; the status also names the step's CSS class, from this
// fixed list.
var stepMark = map[bot.StepStatus]string{
	bot.StepWaiting:  "…",
	bot.StepRunning:  "▸",
	bot.StepDone:     "✓",
	bot.StepFailed:   "✗",
	bot.StepRejected: "⊘",
}

// renderSteps renders a card's tool calls as collapsible steps: closed, each shows its
// mark, the tool and how long it took; open, the arguments and the result. A step's
// data-step is the call's ID, so the page keeps a step a reader opened open when the card
// is edited.
func renderSteps(m bot.Message) string {
	if len(m.Steps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<div class="steps">` + "\n")
	if m.EarlierSteps > 0 {
		n := strconv.Itoa(m.EarlierSteps)
		b.WriteString(`<p class="steps-earlier">` + n + " earlier tool " + plural(m.EarlierSteps, "call", "calls") + " not shown</p>\n")
	}
	for _, s := range m.Steps {
		status, mark := string(s.Status), stepMark[s.Status]
		if mark == "" {
			status, mark = "failed", stepMark[bot.StepFailed]
		}
		b.WriteString(`<details class="step step-` + status + `" data-step="` + escapeText(s.ID) + `">` +
			`<summary><span class="step-mark" aria-hidden="true">` + mark + `</span> <span class="step-tool">` + escapeText(s.Tool) + `</span>` +
			` <span class="step-status">` + status + `</span>`)
		if t := s.Took(); t != "" {
			b.WriteString(` <span class="step-time">` + escapeText(t) + `</span>`)
		}
		b.WriteString("</summary>\n")
		if s.Args != "" {
			b.WriteString(`<div class="step-part"><span class="step-label">Arguments</span><pre><code>` + escapeText(s.Args) + "</code></pre></div>\n")
		}
		if s.Result != "" {
			label := "Result"
			if s.Status != bot.StepDone {
				label = "Error"
			}
			b.WriteString(`<div class="step-part"><span class="step-label">` + label + `</span><pre><code>` + escapeText(s.Result) + "</code></pre></div>\n")
		}
		b.WriteString("</details>\n")
	}
	b.WriteString("</div>\n")
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
