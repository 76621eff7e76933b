package web

import (
	"html"
	"net/url"
	"strings"

	"github.com/loopbot/loopbot/bot/text"
)

// Markdown from the model, read by package text's tokenizer, is turned into a small
// allowlist of HTML elements: p, br, strong, em, del, code, pre, ul, ol, li, blockquote,
// and a with an http or https href. The renderer never copies
// input into the output unescaped: it emits its own tags and escapes all text, so anything
// it does not understand shows as the characters that were sent.

// renderMarkdown renders src to safe HTML.
func renderMarkdown(src string) string {
	var b strings.Builder
	list := "" // "ul" or "ol" while a list is open
	closeList := func() {
		if list != "" {
			b.WriteString("</" + list + ">\n")
			list = ""
		}
	}
	for _, bl := range text.ParseBlocks(src) {
		if bl.Kind == text.ListItem {
			kind := "ul"
			if bl.Ordered() {
				kind = "ol"
			}
			if list != kind {
				closeList()
				b.WriteString("<" + kind + ">\n")
				list = kind
			}
			b.WriteString("<li>" + renderLines(bl.Lines, false) + "</li>\n")
			continue
		}
		closeList()
		switch bl.Kind {
		case text.Paragraph:
			b.WriteString("<p>" + renderLines(bl.Lines, false) + "</p>\n")
		case text.Heading:
			b.WriteString("<p><strong>" + renderLines(bl.Lines, true) + "</strong></p>\n")
		case text.Quote:
			b.WriteString("<blockquote><p>" + renderLines(bl.Lines, false) + "</p></blockquote>\n")
		case text.CodeBlock:
			b.WriteString("<pre><code>" + escapeText(strings.Join(bl.Lines, "\n")) + "</code></pre>\n")
		}
	}
	closeList()
	return b.String()
}

// renderLines renders a block's lines, each trimmed, with line breaks between them. In a
// heading, which is strong as a whole, strong inside it is dropped.
func renderLines(lines []string, heading bool) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteString("<br>")
		}
		renderSpans(&b, text.ParseInline(strings.TrimSpace(l)), heading)
	}
	return b.String()
}

// emphasisTag is the element of each kind of emphasis.
var emphasisTag = map[text.SpanKind]string{text.Strong: "strong", text.Emphasis: "em", text.Strike: "del"}

// renderSpans writes code spans, links, emphasis and the text between them.
func renderSpans(b *strings.Builder, spans []text.Span, heading bool) {
	for _, sp := range spans {
		switch sp.Kind {
		case text.Plain:
			b.WriteString(escapeText(sp.Text))
		case text.Code:
			b.WriteString("<code>" + escapeText(sp.Text) + "</code>")
		case text.Strong, text.Emphasis, text.Strike:
			tag := emphasisTag[sp.Kind]
			if heading && sp.Kind == text.Strong {
				renderSpans(b, sp.Children, heading)
				continue
			}
			b.WriteString("<" + tag + ">")
			renderSpans(b, sp.Children, heading)
			b.WriteString("</" + tag + ">")
		case text.Link:
			u, ok := safeURL(sp.Text)
			if !ok {
				// Not a link we allow: show what was written, as text.
				b.WriteString(escapeText(sp.Raw))
				continue
			}
			b.WriteString(`<a href="` + escapeText(u) + `" rel="noopener nofollow" target="_blank">`)
			renderSpans(b, sp.Children, heading)
			b.WriteString("</a>")
		}
	}
}

// safeURL returns href if it is an absolute http or https URL with a host, normalised as
// net/url writes it.
func safeURL(href string) (string, bool) {
	if href == "" || strings.ContainsFunc(href, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", false
	}
	u, err := url.Parse(href)
	if err != nil || u.Host == "" || u.User != nil {
		return "", false
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", false
	}
	return u.String(), true
}

// escapeText escapes s for HTML text and attribute values. It also breaks up
// "javascript:" (in any case) so that not even the text of a message spells a script URL;
// the browser shows the entity &#58; as the colon it is.
func escapeText(s string) string {
	e := html.EscapeString(s)
	lower := asciiLower(e)
	if !strings.Contains(lower, "script:") {
		return e
	}
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(lower[i:], "script:")
		if j < 0 {
			break
		}
		colon := i + j + len("script")
		b.WriteString(e[last:colon])
		b.WriteString("&#58;")
		last = colon + 1
		i = colon + 1
	}
	b.WriteString(e[last:])
	return b.String()
}

// asciiLower lowercases ASCII letters only, so that byte offsets stay valid in s (unlike
// strings.ToLower, which rewrites invalid UTF-8).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
