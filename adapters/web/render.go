package web

import (
	"strings"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// Rendering is pure: a bot.Message becomes an HTML fragment the page inserts as it is. Only
// Text is Markdown; titles, plan lines, fields, labels and footers are plain text. Class
// names come from fixed lists, never from the message, so a message cannot restyle the page.

// kindClass is the CSS class of each message kind the page knows.
var kindClass = map[bot.MessageKind]string{
	bot.KindStatus:   "status",
	bot.KindApproval: "approval",
	bot.KindAnswer:   "answer",
	bot.KindFailure:  "failure",
	bot.KindQuestion: "question",
	bot.KindNotice:   "notice",
}

// planGlyph draws each plan mark; the mark also names the line's CSS class.
var planGlyph = map[text.Mark]string{
	text.MarkPending: "○",
	text.MarkActive:  "▸",
	text.MarkDone:    "✓",
	text.MarkFailed:  "✗",
}

// renderMessage renders a bot message.
func renderMessage(m bot.Message) string {
	kind, ok := kindClass[m.Kind]
	if !ok {
		kind = "notice"
	}
	var b strings.Builder
	b.WriteString(`<article class="msg msg-` + kind + `">` + "\n")
	if m.Title != "" {
		b.WriteString(`<h3 class="msg-title">` + escapeText(m.Title) + "</h3>\n")
	}
	if m.Text != "" {
		b.WriteString(`<div class="msg-text">` + "\n" + renderMarkdown(m.Text) + "</div>\n")
	}
	if len(m.Plan) > 0 {
		b.WriteString(`<ul class="plan">` + "\n")
		for _, l := range m.Plan {
			mark := text.PlanMark(l.Status)
			b.WriteString(`<li class="plan-` + string(mark) + `"><span class="plan-mark">` + planGlyph[mark] + `</span> ` + escapeText(l.Text) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	if len(m.Fields) > 0 {
		b.WriteString(`<dl class="fields">` + "\n")
		for _, f := range m.Fields {
			b.WriteString("<dt>" + escapeText(f.Name) + "</dt>")
			if f.Code {
				b.WriteString("<dd><pre><code>" + escapeText(f.Value) + "</code></pre></dd>\n")
			} else {
				b.WriteString("<dd>" + escapeText(f.Value) + "</dd>\n")
			}
		}
		b.WriteString("</dl>\n")
	}
	if len(m.Buttons) > 0 {
		b.WriteString(`<div class="buttons">` + "\n")
		for _, btn := range m.Buttons {
			style := "default"
			switch btn.Style {
			case bot.StylePrimary:
				style = "primary"
			case bot.StyleDanger:
				style = "danger"
			}
			b.WriteString(`<button type="button" class="btn btn-` + style + `" data-action="` + escapeText(btn.ID) + `"`)
			if btn.Confirm != "" {
				b.WriteString(` data-confirm="` + escapeText(btn.Confirm) + `"`)
			}
			b.WriteString(">" + escapeText(btn.Label) + "</button>\n")
		}
		b.WriteString("</div>\n")
	}
	if m.Footer != "" {
		b.WriteString(`<footer class="msg-footer">` + escapeText(m.Footer) + "</footer>\n")
	}
	b.WriteString("</article>\n")
	return b.String()
}

// renderUserMessage renders what a person typed in the console, shown as they wrote it.
func renderUserMessage(name, text string) string {
	return `<article class="msg msg-user">` + "\n" +
		`<h3 class="msg-author">` + escapeText(name) + "</h3>\n" +
		`<div class="msg-text"><p class="plain">` + escapeText(text) + "</p></div>\n" +
		"</article>\n"
}
