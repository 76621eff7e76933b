package slack

import (
	"strings"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot/text"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// escaper turns the three characters Slack gives meaning to into entities. With them
// escaped, text cannot form a mention (<@U1>, <!here>, <!channel>), a link or any other
// control sequence; Slack's own clients decode the entities back for display.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes s safe to put in any mrkdwn or fallback text field.
func escape(s string) string { return neutralize(escaper.Replace(s)) }

// broadcast matches the words Slack may treat as a broadcast when a message is sent with
// link_names (loopbot never sets it): a word joiner after the @ keeps them inert even if a
// client or a future default did.
var broadcast = lazyre.New(`(?i)@(channel|here|everyone)\b`)

func neutralize(s string) string { return broadcast.ReplaceAllString(s, "@\u2060$1") }

// controlStart is how Slack markup begins: a special mention, a user or a channel.
var controlStart = strings.NewReplacer("<!", "<\u2060!", "<@", "<\u2060@", "<#", "<\u2060#")

// plain makes s safe for a plain_text object (a header, a button). Slack does not parse
// markup there, but loopbot does not rely on that: mention markup and broadcast words get a
// word joiner, which shows as nothing.
func plain(s string) string { return neutralize(controlStart.Replace(s)) }

// unescape decodes the entities Slack puts in the text of inbound messages, so that the
// goal handed to the bot is what the person typed.
var unescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

// mrkdwn converts the Markdown a model writes into Slack's mrkdwn and escapes everything
// else: headings become bold lines, **bold** *bold*, *italic* and _italic_ _italic_,
// ~~strike~~ ~strike~, [text](https://url) <https://url|text>, list markers bullets.
// Code spans and fenced code blocks are escaped but otherwise left alone; a block's
// language goes, since mrkdwn would show it as code. Only http and https links are made
// links. Every line break is kept.
func mrkdwn(md string) string {
	md = strings.ToValidUTF8(md, "\uFFFD")
	var lines []string
	for _, b := range text.ParseBlocks(md) {
		switch b.Kind {
		case text.CodeBlock:
			lines = append(lines, fence)
			for _, l := range b.Lines {
				lines = append(lines, escape(l))
			}
			lines = append(lines, fence)
		case text.Heading:
			if inner := inline(b.Lines[0], true); inner != "" {
				lines = append(lines, "*"+inner+"*")
			} else {
				lines = append(lines, "")
			}
		case text.ListItem:
			marker := "•"
			if b.Ordered() {
				marker = b.Marker
			}
			lines = append(lines, b.Indent+marker+" "+inline(b.Lines[0], false))
			for _, l := range b.Lines[1:] {
				lines = append(lines, inline(l, false))
			}
		case text.Quote:
			for _, l := range b.Lines {
				lines = append(lines, "&gt; "+inline(l, false))
			}
		default:
			for _, l := range b.Lines {
				lines = append(lines, inline(l, false))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// inline converts one line outside code blocks. In a heading, which is bold as a whole,
// bold inside it is dropped.
func inline(line string, bold bool) string {
	var b strings.Builder
	writeSpans(&b, text.ParseInline(line), bold)
	return b.String()
}

// emphasisMark is mrkdwn's delimiter for each kind of emphasis.
var emphasisMark = map[text.SpanKind]string{text.Strong: "*", text.Emphasis: "_", text.Strike: "~"}

func writeSpans(b *strings.Builder, spans []text.Span, bold bool) {
	for _, sp := range spans {
		switch sp.Kind {
		case text.Plain:
			// Written as the model wrote it, backslashes and all: mrkdwn has no escapes.
			b.WriteString(escape(sp.Raw))
		case text.Code:
			b.WriteString("`" + escape(sp.Raw[len(sp.Delim):len(sp.Raw)-len(sp.Delim)]) + "`")
		case text.Strong, text.Emphasis, text.Strike:
			mark := emphasisMark[sp.Kind]
			if bold && sp.Kind == text.Strong {
				mark = ""
			}
			b.WriteString(mark)
			writeSpans(b, sp.Children, bold)
			b.WriteString(mark)
		case text.Link:
			if !linkURL.MatchString(sp.Text) {
				// Not a link Slack may show: the text as written.
				b.WriteString("[")
				writeSpans(b, sp.Children, bold)
				b.WriteString(escape(sp.Raw[len("[")+len(raw(sp.Children)):]))
				continue
			}
			b.WriteString("<" + strings.ReplaceAll(sp.Text, "&", "&amp;") + "|")
			writeSpans(b, sp.Children, bold)
			b.WriteString(">")
		}
	}
}

// linkURL is a URL that may be a link: http or https, and nothing that would end Slack's
// <url|text> early.
var linkURL = lazyre.New(`^https?://[^\s()<>|]+$`)

// raw is the source of spans, as written.
func raw(spans []text.Span) string {
	var s strings.Builder
	for _, sp := range spans {
		s.WriteString(sp.Raw)
	}
	return s.String()
}

// runeLen is the length Slack's limits are stated in: characters, counted here as runes
// (Slack does not say more). Text is clipped with text.ClipRunes for the same reason.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// atom returns where an entity (&amp;) or a link (<url|text>) open at byte i of the mrkdwn
// text s begins, or -1: a cut is moved out of one, so that no part shows half of it.
// Escaping leaves no bare '&' and no bare '<', so an '&' without its ';' within the
// longest entity's length before i starts an open entity, and a '<' not closed before i
// an open link.
func atom(s string, i int) int {
	for j := i - 1; j >= 0 && j >= i-len("&amp;"); j-- {
		if s[j] == ';' {
			break
		}
		if s[j] == '&' {
			return j
		}
	}
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case '>':
			return -1
		case '<':
			return j
		}
	}
	return -1
}

// fence is what opens and closes a code block.
const fence = text.Fence

// split cuts mrkdwn text into chunks of at most n characters each, without cutting an
// entity or a link; a code block cut in two is closed and reopened, so each chunk renders
// on its own.
func split(s string, n int) []string {
	return text.Splitter{Max: n, Unit: text.Runes, Atom: atom}.Split(s)
}

// clipMrkdwn shortens mrkdwn text to at most n characters without breaking an entity, a
// link or a code block, marking the cut.
func clipMrkdwn(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	const more = "\n…"
	chunks := split(s, n-len([]rune(more)))
	if len(chunks) == 0 {
		return "" // only white space
	}
	return chunks[0] + more
}
