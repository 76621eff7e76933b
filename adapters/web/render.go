package web

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	bot.KindGrants:   "grants",
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
	b.WriteString(renderSteps(m))
	if len(m.Fields) > 0 {
		b.WriteString(`<dl class="fields">` + "\n")
		for _, f := range m.Fields {
			b.WriteString("<dt>" + escapeText(f.Name) + "</dt>")
			if args, ok := fileArgs(m, f); ok {
				b.WriteString("<dd>" + args + "</dd>\n")
			} else if diff, ok := diffField(m, f); ok {
				b.WriteString("<dd>" + diff + "</dd>\n")
			} else if f.Code {
				b.WriteString("<dd><pre><code>" + escapeText(f.Value) + "</code></pre></dd>\n")
			} else {
				b.WriteString("<dd>" + escapeText(f.Value) + "</dd>\n")
			}
		}
		b.WriteString("</dl>\n")
	}
	// A footer that ends in a colon introduces the buttons ("Reply in this thread with
	// instructions, or choose:"), so it goes above them; any other is a closing line.
	lead := m.Footer != "" && len(m.Buttons) > 0 && strings.HasSuffix(m.Footer, ":")
	if lead {
		b.WriteString(`<p class="msg-lead">` + escapeText(m.Footer) + "</p>\n")
	}
	if len(m.Buttons) > 0 {
		// Buttons that ask for a reason (Reject) share one field, read when one is pressed.
		for _, btn := range m.Buttons {
			if btn.Reason != "" {
				b.WriteString(`<input type="text" class="reason" maxlength="1000" placeholder="` + escapeText(btn.Reason) +
					`" aria-label="` + escapeText(btn.Reason) + `">` + "\n")
				break
			}
		}
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
			if btn.Feedback != "" {
				// A rating stays live after the run ended: people may change their mind.
				b.WriteString(` data-feedback="` + escapeText(string(btn.Feedback)) + `"`)
			}
			if btn.Reason != "" {
				b.WriteString(` data-reason="1"`)
			}
			b.WriteString(">" + escapeText(btn.Label) + "</button>\n")
		}
		b.WriteString("</div>\n")
	}
	if files := renderFiles(m); files != "" {
		// The footer names the files in words; here they are links.
		b.WriteString(files)
	} else if m.Footer != "" && !lead {
		b.WriteString(`<footer class="msg-footer">` + escapeText(m.Footer) + "</footer>\n")
	}
	b.WriteString("</article>\n")
	return b.String()
}

// renderUserMessage renders what a person typed in the console, shown as they wrote it.
// Who wrote it is said by the row around it (renderRow).
func renderUserMessage(text string) string {
	return `<article class="msg msg-user">` + "\n" +
		`<div class="msg-text"><p class="plain">` + escapeText(text) + "</p></div>\n" +
		"</article>\n"
}

// fileArgs renders an approval card's arguments as a person reads them when some argument
// is text of several lines, as write_file's content is: each argument on a line of its
// own, and the text as a block of code, rather than one JSON string full of \n. Arguments
// that are not one JSON object (cut for length, say) are left to the code field.
func fileArgs(m bot.Message, f bot.Field) (string, bool) {
	if m.Kind != bot.KindApproval || f.Name != "Arguments" || !f.Code {
		return "", false
	}
	args, ok := text.Members(f.Value)
	if !ok {
		return "", false
	}
	// The one-line arguments (a path, say) come first, the texts after them.
	var files strings.Builder
	var b strings.Builder
	b.WriteString(`<div class="args">` + "\n")
	for _, a := range args {
		var s string
		if json.Unmarshal(a.Value, &s) == nil && strings.Contains(s, "\n") {
			files.WriteString(textArg(m, a.Name, s))
			continue
		}
		if json.Unmarshal(a.Value, &s) != nil {
			var c bytes.Buffer
			if json.Compact(&c, a.Value) != nil {
				return "", false
			}
			s = c.String()
		}
		b.WriteString(`<div class="arg"><span class="arg-name">` + escapeText(a.Name) + `</span> <code>` + escapeText(s) + "</code></div>\n")
	}
	b.WriteString(files.String() + "</div>")
	return b.String(), files.Len() > 0
}

// botName is how the page names the bot's messages.
const botName = "loopbot"

// renderRow wraps a rendered message in a chat row: an avatar of initials, the author's
// name and the time it was sent (UTC here; the page shows it in the reader's own zone).
// author is "" for the bot.
func renderRow(author string, sent time.Time, inner string) string {
	side, name := "from-bot", botName
	if author != "" {
		side, name = "from-person", author
	}
	return `<div class="row-chat ` + side + `">` + "\n" +
		`<span class="avatar" aria-hidden="true">` + escapeText(initials(name)) + "</span>\n" +
		`<div class="bubble">` + "\n" +
		`<div class="meta"><span class="author">` + escapeText(name) + `</span> <time datetime="` +
		sent.UTC().Format(time.RFC3339) + `">` + sent.UTC().Format("15:04") + "</time></div>\n" +
		inner + "</div>\n</div>\n"
}

// initials are the avatar's letters: the first letter of name and of its next word, so
// "ann.lee" is AL and "bob" is B.
func initials(name string) string {
	var out []rune
	next := true
	for _, r := range name {
		switch {
		case r == '@':
			return strings.ToUpper(string(out))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if next && len(out) < 2 {
				out = append(out, r)
			}
			next = false
		default:
			next = true
		}
	}
	if len(out) == 0 {
		r, _ := utf8.DecodeRuneInString(name)
		if r == utf8.RuneError {
			return "?"
		}
		out = append(out, r)
	}
	return strings.ToUpper(string(out))
}
