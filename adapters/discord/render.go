package discord

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// Discord's limits on what one message may hold.
const (
	maxContent      = 2000
	maxEmbedTotal   = 6000
	maxTitle        = 256
	maxDescription  = 4096
	maxFields       = 25
	maxFieldName    = 256
	maxFieldValue   = 1024
	maxFooter       = 2048
	maxButtonsInRow = 5
	maxRows         = 5
	maxCustomID     = 100
	maxLabel        = 80
	// maxParts is how many messages a long text is split into. Past it the first message
	// carries a preview and the whole text goes along as a Markdown file, since a wall of
	// messages buries the thread and every part notifies.
	maxParts = 4
)

// Embed colours by message kind.
const (
	colorStatus   = 0x5865F2 // blurple
	colorApproval = 0xFEE75C // yellow: waiting for a person
	colorDecided  = 0x99AAB5 // grey: nothing left to do
	colorFailure  = 0xED4245 // red
)

// noMentions lets nothing in a message ping anyone: the model's text is escaped too, but a
// message is only as safe as its allowed_mentions.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// outgoing is one Discord message as the adapter sends it. It marshals to what the golden
// files show: the fields of Discord's create-message payload, and the attachment's name and
// text instead of a multipart upload.
type outgoing struct {
	Content         string                            `json:"content,omitempty"`
	Embeds          []*discordgo.MessageEmbed         `json:"embeds,omitempty"`
	Components      []discordgo.MessageComponent      `json:"components,omitempty"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
	File            *attachment                       `json:"file,omitempty"`
}

// attachment is a text file sent with a message.
type attachment struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// render turns a bot message into the Discord messages that show it, in order. Cards
// (status, approval) are always one message with an embed, so they can be edited in place;
// texts (answer, failure, question, notice) are message content, split on paragraph and
// line boundaries into at most maxParts messages, or previewed and attached as a file.
func render(m bot.Message) []outgoing {
	switch m.Kind {
	case bot.KindStatus, bot.KindApproval:
		return []outgoing{renderCard(m)}
	}
	return renderText(m)
}

// renderOne is render for an edit, which changes one message: a text too long for it is cut
// and says so.
func renderOne(m bot.Message) outgoing {
	parts := render(m)
	out := parts[0]
	if len(parts) > 1 {
		const more = "\n\n-# (cut: too long for one message)"
		out.Content = text.ClipBytes(out.Content, maxContent-len(more)) + more
		out.Components = parts[len(parts)-1].Components
	}
	return out
}

// renderCard renders a status or approval card as one embed and its buttons.
func renderCard(m bot.Message) outgoing {
	e := &discordgo.MessageEmbed{Title: text.ClipBytes(oneLine(escape(m.Title)), maxTitle)}
	var desc []string
	if m.Text != "" {
		txt := escape(m.Text)
		if m.Kind == bot.KindStatus {
			txt = "**" + txt + "**"
		}
		desc = append(desc, txt)
	}
	if len(m.Plan) > 0 {
		var plan []string
		for _, p := range m.Plan {
			plan = append(plan, planMarks[text.PlanMark(p.Status)]+" "+oneLine(escape(p.Text)))
		}
		desc = append(desc, strings.Join(plan, "\n"))
	}
	if m.Kind == bot.KindApproval {
		// Discord buttons cannot ask for confirmation, so the warning goes on the card, where
		// it is read before the click.
		for _, b := range m.Buttons {
			if b.Confirm != "" {
				desc = append(desc, "⚠️ "+escape(b.Confirm))
			}
		}
	}
	e.Description = text.ClipBytes(strings.Join(desc, "\n\n"), maxDescription)
	for i, f := range m.Fields {
		if i == maxFields {
			break
		}
		e.Fields = append(e.Fields, &discordgo.MessageEmbedField{
			Name:   orBlank(text.ClipBytes(oneLine(escape(f.Name)), maxFieldName)),
			Value:  orBlank(fieldValue(f)),
			Inline: !f.Code && len(f.Value) <= 40,
		})
	}
	// A card's tool calls, as one field: the console folds out their arguments and results.
	if l := m.StepsLine(); l != "" && len(e.Fields) < maxFields {
		e.Fields = append(e.Fields, &discordgo.MessageEmbedField{Name: "Tool calls", Value: text.ClipBytes(escape(strings.TrimPrefix(l, "Tool calls: ")), maxFieldValue)})
	}
	if m.Footer != "" {
		e.Footer = &discordgo.MessageEmbedFooter{Text: text.ClipBytes(escape(m.Footer), maxFooter)}
	}
	switch {
	case m.Kind == bot.KindStatus:
		e.Color = colorStatus
	case len(m.Buttons) > 0:
		e.Color = colorApproval
	default:
		e.Color = colorDecided
	}
	fitEmbed(e)
	return outgoing{
		Embeds:          []*discordgo.MessageEmbed{e},
		Components:      buttons(m.Kind, m.Buttons),
		AllowedMentions: noMentions(),
	}
}

// fieldValue renders a field's value within the field limit; code goes in a fenced block.
func fieldValue(f bot.Field) string {
	if !f.Code {
		return text.ClipBytes(escape(f.Value), maxFieldValue)
	}
	const open, close = "```\n", "\n```"
	v := fenceSafe(f.Value)
	return open + text.ClipBytes(v, maxFieldValue-len(open)-len(close)) + close
}

// fitEmbed trims an embed to Discord's 6000 characters in total: the description gives way
// first, then fields are dropped from the end.
func fitEmbed(e *discordgo.MessageEmbed) {
	size := func() int {
		n := utf8.RuneCountInString(e.Title) + utf8.RuneCountInString(e.Description)
		if e.Footer != nil {
			n += utf8.RuneCountInString(e.Footer.Text)
		}
		for _, f := range e.Fields {
			n += utf8.RuneCountInString(f.Name) + utf8.RuneCountInString(f.Value)
		}
		return n
	}
	if over := size() - maxEmbedTotal; over > 0 {
		keep := max(utf8.RuneCountInString(e.Description)-over-1, 0)
		e.Description = text.ClipRunes(e.Description, keep)
	}
	for size() > maxEmbedTotal && len(e.Fields) > 0 {
		e.Fields = e.Fields[:len(e.Fields)-1]
	}
}

// buttons lays buttons out five to a row, at most five rows. A button whose ID does not fit
// a custom_id is left out: cut, it would find nothing, and the bot's IDs never come close.
func buttons(kind bot.MessageKind, bs []bot.Button) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	var row []discordgo.MessageComponent
	for _, b := range bs {
		if b.ID == "" || len(buttonCustomID(b)) > maxCustomID {
			continue
		}
		if len(row) == maxButtonsInRow {
			rows = append(rows, discordgo.ActionsRow{Components: row})
			row = nil
		}
		if len(rows) == maxRows {
			break
		}
		row = append(row, discordgo.Button{
			Label:    orBlank(text.ClipBytes(oneLine(b.Label), maxLabel)),
			Style:    buttonStyle(kind, b.Style),
			CustomID: buttonCustomID(b),
		})
	}
	if len(row) > 0 && len(rows) < maxRows {
		rows = append(rows, discordgo.ActionsRow{Components: row})
	}
	return rows
}

// buttonStyle maps bot styles to Discord's. On an approval card the primary button is
// Approve, which Discord users expect in green.
func buttonStyle(kind bot.MessageKind, s bot.ButtonStyle) discordgo.ButtonStyle {
	switch {
	case s == bot.StyleDanger:
		return discordgo.DangerButton
	case s == bot.StylePrimary && kind == bot.KindApproval:
		return discordgo.SuccessButton
	case s == bot.StylePrimary:
		return discordgo.PrimaryButton
	}
	return discordgo.SecondaryButton
}

// planMarks draws each plan mark as an emoji.
var planMarks = map[text.Mark]string{
	text.MarkPending: "⬜",
	text.MarkActive:  "🔄",
	text.MarkDone:    "✅",
	text.MarkFailed:  "❌",
}

// renderText renders a text message as content: a bold heading, the text, the footer as
// small print, the buttons under the last part.
func renderText(m bot.Message) []outgoing {
	var head string
	switch m.Kind {
	case bot.KindFailure:
		head = "❌ "
	case bot.KindQuestion:
		head = "❓ "
	case bot.KindNotice:
		head = "ℹ️ "
	}
	var b strings.Builder
	if m.Title != "" {
		b.WriteString(head + "**" + oneLine(escape(m.Title)) + "**\n")
	} else if head != "" {
		b.WriteString(head)
	}
	b.WriteString(escape(markdown(m.Text)))
	if m.Footer != "" {
		b.WriteString("\n-# " + oneLine(escape(m.Footer)))
	}
	body := strings.TrimSpace(b.String())
	if body == "" {
		body = "\u200b"
	}
	chunks := text.Split(body, maxContent)
	var out []outgoing
	if len(chunks) > maxParts {
		const note = "\n\n-# The full text is attached as %s."
		name := string(m.Kind) + ".md"
		preview := text.Split(body, maxContent-len(note)-len(name))[0]
		out = []outgoing{{
			Content:         preview + fmt.Sprintf(note, name),
			AllowedMentions: noMentions(),
			File:            &attachment{Name: name, Content: m.Text},
		}}
	} else {
		for _, c := range chunks {
			out = append(out, outgoing{Content: c, AllowedMentions: noMentions()})
		}
	}
	out[len(out)-1].Components = buttons(m.Kind, m.Buttons)
	return out
}

// oneLine folds line breaks, for titles, labels and checklist items.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// orBlank stands in a zero-width space for an empty string, which Discord refuses in
// field names, field values and button labels.
func orBlank(s string) string {
	if strings.TrimSpace(s) == "" {
		return "\u200b"
	}
	return s
}

// markdown rewrites the model's Markdown in the dialect Discord renders: a heading deeper
// than Discord's three levels becomes a bold line, a ~~~ fence a ``` one, a code block left
// open is closed, and list markers and quotes are written in one way. Everything else is
// written as the model wrote it: Discord renders Markdown itself. It escapes nothing;
// mentions are escaped after, over the whole message.
func markdown(md string) string {
	var lines []string
	for _, b := range text.ParseBlocks(md) {
		switch b.Kind {
		case text.CodeBlock:
			lines = append(lines, text.Fence+b.Lang)
			lines = append(lines, b.Lines...)
			lines = append(lines, text.Fence)
		case text.Heading:
			if b.Level <= 3 {
				lines = append(lines, strings.Repeat("#", b.Level)+" "+inline(b.Lines[0], false))
			} else {
				lines = append(lines, "**"+inline(b.Lines[0], true)+"**")
			}
		case text.ListItem:
			lines = append(lines, b.Indent+b.Marker+" "+inline(b.Lines[0], false))
			for _, l := range b.Lines[1:] {
				lines = append(lines, inline(l, false))
			}
		case text.Quote:
			for _, l := range b.Lines {
				lines = append(lines, "> "+inline(l, false))
			}
		default:
			for _, l := range b.Lines {
				lines = append(lines, inline(l, false))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// inline writes one line's spans back in Discord's syntax, which is the model's: only a
// link's URL is trimmed. In a line that is bold as a whole, bold inside it is dropped.
func inline(line string, bold bool) string {
	var b strings.Builder
	writeSpans(&b, text.ParseInline(line), bold)
	return b.String()
}

func writeSpans(b *strings.Builder, spans []text.Span, bold bool) {
	for _, sp := range spans {
		switch sp.Kind {
		case text.Strong, text.Emphasis, text.Strike:
			delim := sp.Delim
			if bold && sp.Kind == text.Strong {
				delim = ""
			}
			b.WriteString(delim)
			writeSpans(b, sp.Children, bold)
			b.WriteString(delim)
		case text.Link:
			b.WriteString("[")
			writeSpans(b, sp.Children, bold)
			b.WriteString("](" + sp.Text + ")")
		default:
			b.WriteString(sp.Raw)
		}
	}
}

// zwsp is the zero-width space escape inserts to break a mention apart.
const zwsp = "\u200b"

// mentionEscaper breaks every way text can mention someone: @everyone, @here, and the
// <@user>, <@!user> and <@&role> syntax. The text still reads the same.
var mentionEscaper = strings.NewReplacer(
	"@everyone", "@"+zwsp+"everyone",
	"@here", "@"+zwsp+"here",
	"<@", "<"+zwsp+"@",
)

// escape makes model or user text safe to post: it cannot ping anyone. Markdown is kept:
// Discord renders it, and the model writes it for that.
func escape(s string) string { return mentionEscaper.Replace(s) }

// fenceSafe keeps text inside a code block from closing it early.
func fenceSafe(s string) string { return strings.ReplaceAll(s, "```", "`"+zwsp+"``") }
