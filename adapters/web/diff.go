package web

import (
	"strconv"
	"strings"

	"github.com/loopbot/loopbot/bot"
)

// diffField renders an approval card's Changes (write_file's unified diff of the file it
// replaces) with removed lines, added lines and hunk headers marked, so the change reads at
// a glance. Any other field is not its business.
func diffField(m bot.Message, f bot.Field) (string, bool) {
	if m.Kind != bot.KindApproval || f.Name != "Changes" || !f.Code || !strings.HasPrefix(f.Value, "--- ") {
		return "", false
	}
	var b strings.Builder
	b.WriteString(`<pre class="diff"><code>`)
	for i, line := range strings.Split(f.Value, "\n") {
		if i > 0 {
			b.WriteString("\n")
		}
		class := ""
		switch {
		case i < 2:
			class = "diff-file"
		case strings.HasPrefix(line, "@@"):
			class = "diff-hunk"
		case strings.HasPrefix(line, "+"):
			class = "diff-add"
		case strings.HasPrefix(line, "-"):
			class = "diff-del"
		}
		if class == "" {
			b.WriteString(escapeText(line))
			continue
		}
		b.WriteString(`<span class="` + class + `">` + escapeText(line) + `</span>`)
	}
	b.WriteString("</code></pre>")
	return b.String(), true
}

// textArg renders a text argument of an approval card (write_file's content) as a block of
// code. When the card shows the diff of the file it replaces, the diff is what to read, so
// the whole text is folded under its name and size, a click away.
func textArg(m bot.Message, name, s string) string {
	pre := `<pre class="arg-file"><code>` + escapeText(s) + "</code></pre>"
	for _, f := range m.Fields {
		if _, ok := diffField(m, f); ok {
			lines := strconv.Itoa(strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1)
			return `<div class="arg"><details class="arg-fold"><summary><span class="arg-name">` + escapeText(name) +
				`</span> (` + lines + " lines; the changes are below)</summary>" + pre + "</details></div>\n"
		}
	}
	return `<div class="arg"><span class="arg-name">` + escapeText(name) + `</span>` + pre + "</div>\n"
}
