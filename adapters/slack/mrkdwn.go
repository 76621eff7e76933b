package slack

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot/text"
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
var broadcast = regexp.MustCompile(`(?i)@(channel|here|everyone)\b`)

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

var (
	heading  = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	bullet   = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	mdLink   = regexp.MustCompile(`\[([^\[\]]+)\]\((https?://[^\s()<>|]+)\)`)
	mdBold   = regexp.MustCompile(`\*\*([^*\n]+?)\*\*`)
	mdItalic = regexp.MustCompile(`(^|[^\w*])\*([^*\s][^*\n]*?)\*`)
	mdStrike = regexp.MustCompile(`~~([^~\n]+?)~~`)
)

// boldMark stands in for a converted **bold** while single-star italics are converted, so
// the two are not confused; it cannot occur in input (NULs are stripped first).
const boldMark = "\x00"

// mrkdwn converts the Markdown a model writes into Slack's mrkdwn and escapes everything
// else: headings become bold lines, **bold** *bold*, *italic* _italic_, ~~strike~~ ~strike~,
// [text](https://url) <https://url|text>, list markers bullets. Code spans and fenced code
// blocks are escaped but otherwise left alone. Only http and https links are made links.
func mrkdwn(md string) string {
	md = strings.ToValidUTF8(strings.ReplaceAll(md, boldMark, ""), "\uFFFD")
	md = strings.ReplaceAll(md, "\r\n", "\n")
	var out strings.Builder
	inFence := false
	for i, line := range strings.Split(md, "\n") {
		if i > 0 {
			out.WriteByte('\n')
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") && (inFence || strings.Count(trimmed, "```") == 1) {
			// An opening fence loses its language tag, which mrkdwn would show as code.
			inFence = !inFence
			out.WriteString("```")
			continue
		}
		if inFence {
			out.WriteString(escape(line))
			continue
		}
		out.WriteString(mrkdwnLine(line))
	}
	if inFence {
		out.WriteString("\n```")
	}
	return out.String()
}

func mrkdwnLine(line string) string {
	if m := heading.FindStringSubmatch(line); m != nil {
		inner := strings.ReplaceAll(m[1], "**", "")
		if inner == "" {
			return ""
		}
		return "*" + inline(inner) + "*"
	}
	if m := bullet.FindStringSubmatch(line); m != nil && !strings.HasPrefix(strings.TrimSpace(line), "**") {
		return m[1] + "• " + inline(m[2])
	}
	return inline(line)
}

// inline converts one line outside code fences. Backtick spans are kept verbatim (escaped);
// an unpaired backtick is just a character.
func inline(s string) string {
	parts := strings.Split(s, "`")
	var out strings.Builder
	for i, p := range parts {
		inCode := i%2 == 1 && i < len(parts)-1
		switch {
		case inCode:
			out.WriteString("`" + escape(p) + "`")
		case i%2 == 1:
			out.WriteString("`" + prose(p))
		default:
			out.WriteString(prose(p))
		}
	}
	return out.String()
}

// prose converts links and emphasis in text that is not code.
func prose(s string) string {
	var out strings.Builder
	last := 0
	for _, m := range mdLink.FindAllStringSubmatchIndex(s, -1) {
		out.WriteString(emphasis(s[last:m[0]]))
		text, url := s[m[2]:m[3]], s[m[4]:m[5]]
		out.WriteString("<" + strings.ReplaceAll(url, "&", "&amp;") + "|" + emphasis(text) + ">")
		last = m[1]
	}
	out.WriteString(emphasis(s[last:]))
	return out.String()
}

func emphasis(s string) string {
	s = escape(s)
	s = mdBold.ReplaceAllString(s, boldMark+"$1"+boldMark)
	s = mdItalic.ReplaceAllString(s, "${1}_${2}_")
	s = mdStrike.ReplaceAllString(s, "~$1~")
	return strings.ReplaceAll(s, boldMark, "*")
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
	return chunks[0] + more
}
