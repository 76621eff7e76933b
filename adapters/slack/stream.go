package slack

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// With the Agents & AI Apps features (Config.Assistant), a run's answer is streamed into its
// thread as the model writes it (bot.Streamer): chat.startStream opens a streaming message,
// chat.appendStream adds markdown_text to it, and the run's plan goes there too, as
// task_update chunks shown as a plan of task cards. Text the model wrote before it called a
// tool stays as narration above the answer. When the run completes, the Post of its answer
// finalises the stream: it appends what the stream lacks of the answer and stops it, and the
// streamed message is the answer, so it is not posted twice. A run that stops without an
// answer has its stream stopped. If Slack refuses to start a stream (the app lacks the
// feature or its scope, or the conversation does not allow it), the adapter says so in the
// log once and uses its Block Kit messages from then on.

var (
	_ bot.Streamer     = (*Adapter)(nil)
	_ bot.PlanStreamer = (*Adapter)(nil)
	_ bot.StreamPacer  = (*Adapter)(nil)
)

// maxStreamText is Slack's limit on markdown_text in the streaming methods.
const maxStreamText = 12000

// streamEvery is the least time between two appends to one streaming message:
// chat.appendStream is a Tier 4 method (100+ calls a minute), so one a second leaves room
// for a few streams at once.
const streamEvery = time.Second

// StreamEvery tells the bot how often it may append to a stream.
func (a *Adapter) StreamEvery() time.Duration { return streamEvery }

// maxTaskTitle bounds a task card's title.
const maxTaskTitle = 256

// streams are the adapter's open streaming messages.
type streams struct {
	mu sync.Mutex
	// refused is set once Slack refused to start a stream: the fallback for good.
	refused bool
	open    map[string]*openStream // by thread key
}

// openStream is one streaming message.
type openStream struct {
	channel, ts string
	// text is the answer's text streamed since the last reset, as the bot gave it, which
	// the answer must start with for the stream to become the answer.
	text string
	// narrated is set once text was streamed, so a reset leaves a paragraph break.
	narrated bool
	// tasks are the plan's lines as last sent.
	tasks []bot.PlanLine
}

// Streams reports whether a thread can show a streamed answer: the app has the feature, the
// run is in a thread, and Slack has not refused a stream.
func (a *Adapter) Streams(th bot.ThreadRef) bool {
	if !a.cfg.Assistant || th.Thread == "" {
		return false
	}
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	return !a.streams.refused
}

// stream returns the open stream of a thread, or nil.
func (a *Adapter) stream(th bot.ThreadRef) *openStream {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	return a.streams.open[th.Key()]
}

// setStream records st as the open stream of a thread; nil forgets it.
func (a *Adapter) setStream(th bot.ThreadRef, st *openStream) {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	if a.streams.open == nil {
		a.streams.open = map[string]*openStream{}
	}
	if st == nil {
		delete(a.streams.open, th.Key())
		return
	}
	a.streams.open[th.Key()] = st
}

// start opens a streaming message in the run's thread with its first content. A refusal
// that retrying cannot fix turns streaming off for the process.
func (a *Adapter) start(ctx context.Context, s bot.Stream, content slack.MsgOption) (*openStream, error) {
	_, ts, err := a.api.StartStreamContext(ctx, s.Thread.Channel,
		slack.MsgOptionTS(s.Thread.Thread),
		slack.MsgOptionRecipientTeamID(s.Thread.Workspace),
		slack.MsgOptionRecipientUserID(s.User),
		slack.MsgOptionTaskDisplayMode(slack.TaskDisplayModePlan),
		content)
	if err != nil {
		// Any answer of Slack's that refuses the call (not_allowed, missing_scope, an
		// unknown method, ...) is taken as this app or workspace not streaming; a rate
		// limit or a network failure is not.
		if _, ok := errors.AsType[slack.SlackErrorResponse](err); ok {
			a.streams.mu.Lock()
			first := !a.streams.refused
			a.streams.refused = true
			a.streams.mu.Unlock()
			if first {
				a.log.Warn("slack refused to stream an answer; Block Kit messages are used instead from now on "+
					"(check the app's Agents & AI Apps feature and its assistant:write scope, or set [slack] assistant = false)", "err", err)
			}
		}
		return nil, classify("start stream", err)
	}
	st := &openStream{channel: s.Thread.Channel, ts: ts}
	a.setStream(s.Thread, st)
	return st, nil
}

// StreamText adds text to the thread's streaming message, opening it if need be.
func (a *Adapter) StreamText(ctx context.Context, s bot.Stream, md string) error {
	st := a.stream(s.Thread)
	rest := md
	if st == nil {
		first := rest[:cutStreamText(rest)]
		var err error
		if st, err = a.start(ctx, s, slack.MsgOptionMarkdownText(streamMarkdown(first))); err != nil {
			return err
		}
		rest = rest[len(first):]
	}
	if err := a.appendText(ctx, st, rest); err != nil {
		return err
	}
	st.text += md
	st.narrated = true
	return nil
}

// appendText appends text to an open stream, in pieces Slack takes.
func (a *Adapter) appendText(ctx context.Context, st *openStream, md string) error {
	for md != "" {
		part := md[:cutStreamText(md)]
		if _, _, err := a.api.AppendStreamContext(ctx, st.channel, st.ts, slack.MsgOptionMarkdownText(streamMarkdown(part))); err != nil {
			return classify("append to stream", err)
		}
		md = md[len(part):]
	}
	return nil
}

// cutStreamText is where the first part of md that Slack takes in one call ends.
func cutStreamText(md string) int {
	if i := text.CutBytes(md, maxStreamText); i > 0 {
		return i
	}
	return len(md)
}

// StreamReset keeps what was streamed as narration and starts a new paragraph for what
// comes next.
func (a *Adapter) StreamReset(ctx context.Context, s bot.Stream) error {
	st := a.stream(s.Thread)
	if st == nil {
		return nil
	}
	st.text = ""
	if !st.narrated {
		return nil
	}
	st.narrated = false
	if _, _, err := a.api.AppendStreamContext(ctx, st.channel, st.ts, slack.MsgOptionMarkdownText("\n\n")); err != nil {
		return classify("append to stream", err)
	}
	return nil
}

// StreamStop stops the thread's streaming message.
func (a *Adapter) StreamStop(ctx context.Context, s bot.Stream) error {
	st := a.stream(s.Thread)
	if st == nil {
		return nil
	}
	a.setStream(s.Thread, nil)
	if _, _, err := a.api.StopStreamContext(ctx, st.channel, st.ts); err != nil {
		return classify("stop stream", err)
	}
	return nil
}

// StreamPlan shows the run's plan as task cards: a task_update chunk for every line that
// is new or changed since the last.
func (a *Adapter) StreamPlan(ctx context.Context, s bot.Stream, plan []bot.PlanLine) error {
	st := a.stream(s.Thread)
	var sent []bot.PlanLine
	if st != nil {
		sent = st.tasks
	}
	chunks := taskChunks(sent, plan)
	if len(chunks) == 0 {
		return nil
	}
	if st == nil {
		var err error
		if st, err = a.start(ctx, s, slack.MsgOptionChunks(chunks...)); err != nil {
			return err
		}
	} else if _, _, err := a.api.AppendStreamContext(ctx, st.channel, st.ts, slack.MsgOptionChunks(chunks...)); err != nil {
		return classify("append tasks to stream", err)
	}
	st.tasks = append([]bot.PlanLine(nil), plan...)
	return nil
}

// taskChunks are the task_update chunks that bring the task cards from sent to plan. A
// task is known by its place in the plan, so a renamed step updates its card.
func taskChunks(sent, plan []bot.PlanLine) []slack.StreamChunk {
	var out []slack.StreamChunk
	for i, l := range plan {
		if i < len(sent) && sent[i] == l {
			continue
		}
		c := slack.NewTaskUpdateChunk("step-"+strconv.Itoa(i+1), plain(text.ClipRunes(l.Text, maxTaskTitle)))
		c.Status = taskStatus[text.PlanMark(l.Status)]
		out = append(out, c)
	}
	return out
}

// taskStatus is a task card's status for each plan mark.
var taskStatus = map[text.Mark]slack.TaskCardStatus{
	text.MarkPending: slack.TaskCardStatusPending,
	text.MarkActive:  slack.TaskCardStatusInProgress,
	text.MarkDone:    slack.TaskCardStatusComplete,
	text.MarkFailed:  slack.TaskCardStatusError,
}

// finishStream makes the thread's streaming message the answer msg, if one is open: it
// appends what the stream lacks of the answer and stops it, with the rest of the answer
// (its footer and buttons) at the bottom. It reports whether the
// answer is shown. If the streamed text is not the start of the answer (the bot stopped
// streaming it part way), or Slack fails, the streamed message is deleted so that the
// answer, posted as usual, is not shown twice.
func (a *Adapter) finishStream(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, bool) {
	st := a.stream(th)
	if st == nil {
		return bot.MessageRef{}, false
	}
	a.setStream(th, nil)
	rest, ok := strings.CutPrefix(msg.Text, st.text)
	if ok {
		err := error(nil)
		if strings.TrimSpace(rest) != "" {
			err = a.appendText(ctx, st, rest)
		}
		if err == nil {
			err = a.stopWithTail(ctx, st, msg)
		}
		if err == nil {
			return bot.MessageRef{Thread: th, ID: st.ts}, true
		}
		a.log.Warn("finish streamed answer; posting it instead", "thread", th.Key(), "err", err)
	}
	_, _, _ = a.api.StopStreamContext(ctx, st.channel, st.ts)
	if _, _, err := a.api.DeleteMessageContext(ctx, st.channel, st.ts); err != nil {
		a.log.Warn("delete streamed answer", "thread", th.Key(), "err", err)
	}
	return bot.MessageRef{}, false
}

// stopWithTail stops a stream that became the answer msg, with what the answer shows besides
// its text (a footer, buttons) as blocks at the bottom of the message.
func (a *Adapter) stopWithTail(ctx context.Context, st *openStream, msg bot.Message) error {
	tail := msg
	tail.Title, tail.Text = "", ""
	var opts []slack.MsgOption
	if parts, err := render(tail, true, a.cfg.Assistant); err == nil && len(parts[0].Blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(parts[0].Blocks...))
	}
	if _, _, err := a.api.StopStreamContext(ctx, st.channel, st.ts, opts...); err != nil {
		return classify("stop stream", err)
	}
	return nil
}

// streamMarkdown makes text safe for markdown_text: mention markup and broadcast words
// are made inert, as in every other text the adapter sends.
func streamMarkdown(s string) string { return plain(s) }
