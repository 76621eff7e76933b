package web

import (
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
