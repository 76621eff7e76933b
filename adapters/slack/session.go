package slack

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

// Events are handled by a few workers; each thread always goes to the same one, so the
// messages of one thread reach the bot in the order Slack sent them while a slow thread
// does not hold up the others.
const workers = 4

// queueCap is how many acknowledged deliveries one worker may have waiting. Taking a
// delivery never waits for the worker, so that acknowledgements go out as envelopes arrive
// however far behind the bot is; past this many, a Socket Mode envelope is not acknowledged
// (Slack delivers it again later) and an HTTP delivery is answered 503, so memory stays
// bounded and nothing is lost.
const queueCap = 1024

// job is one acknowledged delivery waiting for the bot.
type job struct {
	ev bot.Event
	// goal is set for /loopbot <goal>: the root message to post before the bot sees ev.
	goal string
	// responseURL, if set, is where a notice goes instead of chat.postEphemeral.
	responseURL string
	// historyBefore, if set, is the ts of a mention in the middle of a thread: the thread's
	// messages before it are fetched for ev.History.
	historyBefore string
	// prompts marks a new assistant thread (ev names it): it gets the suggested prompts and
	// never reaches the bot.
	prompts bool
	// reason, if set, is a click that asks for a reason first (modal.go).
	reason *reasonClick
}

// session is one Run: the bot's identity, the handler and the workers. Whatever is put in
// its queues has been acknowledged to Slack, so it is handled even after Run's context ends
// (for up to DrainTimeout): Slack would not deliver it again.
type session struct {
	a      *Adapter
	h      bot.Handler
	acc    acceptor // h, when it accepts events; nil otherwise
	self   identity
	queues [workers]*queue
	// intake holds the workers while envelopes wait for their acknowledgement (intake.go).
	intake *intake
	wg     sync.WaitGroup
	// work is the context of handling: it outlives Run's context by the drain.
	work     context.Context
	stopWork context.CancelFunc
	closed   bool
}

func (a *Adapter) newSession(ctx context.Context, h bot.Handler, self identity) *session {
	hold := intakeHold
	if a.intakeHold > 0 {
		hold = a.intakeHold
	}
	s := &session{a: a, h: h, self: self, intake: newIntake(hold, intakeLinger)}
	s.acc, _ = h.(acceptor)
	s.work, s.stopWork = context.WithCancel(context.WithoutCancel(ctx))
	limit := queueCap
	if a.queueCap > 0 {
		limit = a.queueCap
	}
	for i := range s.queues {
		q := newQueue(limit)
		s.queues[i] = q
		s.wg.Go(func() {
			for {
				j, ok := q.take()
				if !ok {
					return
				}
				s.intake.wait(s.work)
				s.process(j)
			}
		})
	}
	return s
}

// queueFor picks the worker of a job by its thread (by channel while a /loopbot thread is
// yet to be posted).
func (s *session) queueFor(j job) *queue { return s.queues[workerOf(j.ev.Thread)] }

// workerOf is the index of the worker that handles thread's events. maphash spreads
// threads evenly over the workers; FNV-1a modulo a power of two would not, as its low bits
// depend only on the low bits of each byte.
func workerOf(thread bot.ThreadRef) int {
	return int(maphash.String(workerSeed, thread.Channel+"/"+thread.Thread) % workers)
}

// workerSeed is the seed of workerOf, fixed for the process so that a thread keeps its
// worker.
var workerSeed = maphash.MakeSeed()

// acceptor is a handler that stores events durably before the platform is acknowledged
// (bot.Bot.Accept, bot/inbox.go): what it accepted is handled even if the process dies
// before it reaches Handle.
type acceptor interface {
	Accept(ctx context.Context, evs []bot.Event) ([]bool, error)
}

// durable reports whether j is accepted before it is acknowledged: the handler accepts
// events, and j reaches it as it is. The other jobs do something of Slack's first that
// the bot could not redo after a restart (post a /loopbot root message, open a modal with
// a trigger that expires in 3 seconds, suggest prompts), and are acknowledged first.
func (s *session) durable(j job) bool {
	return s.acc != nil && j.goal == "" && !j.prompts && j.reason == nil
}

// tryEnqueue hands a job to its worker, after accepting it when it is durable, and
// reports false when it must not be acknowledged: the worker has queueCap jobs waiting, or
// the handler could not store it.
func (s *session) tryEnqueue(j job) bool {
	q := s.queueFor(j)
	if !q.reserve() {
		return false
	}
	if s.durable(j) {
		added, err := s.acc.Accept(s.work, []bot.Event{j.ev})
		if err != nil {
			s.a.log.Error("slack: accept event", "event", j.ev.ID, "err", logSafe(err))
			q.release()
			return false
		}
		if !added[0] {
			// A redelivery of an event waiting to be handled.
			q.release()
			return true
		}
	}
	q.commit(&j)
	return true
}

// drain stops taking jobs and handles those queued, giving up after the drain timeout.
// The caller must be sure that nothing puts jobs in the queues any more.
func (s *session) drain() {
	if s.closed {
		return
	}
	s.closed = true
	s.intake.reset()
	for _, q := range s.queues {
		q.close()
	}
	t := time.AfterFunc(s.a.cfg.DrainTimeout, s.stopWork)
	s.wg.Wait()
	t.Stop()
	s.stopWork()
}

// queue is one worker's jobs, in the order they were given. It grows as a slice up to its
// limit instead of making the giver wait, and it lets room be reserved before a delivery is
// acknowledged, so that an acknowledged delivery always has a place.
type queue struct {
	limit int
	// ready holds a wake-up for the worker whenever jobs were added or the queue closed
	// since it last looked; one is enough, as the worker looks again before it waits.
	ready chan struct{}

	mu sync.Mutex
	// jobs[head:] wait, oldest first. The array is kept while the queue empties and fills
	// again, up to keptQueueJobs, so that each burst does not grow one anew.
	jobs     []*job
	head     int
	reserved int // room promised by reserve and not yet filled by commit or given back
	closed   bool
}

// keptQueueJobs bounds the array a queue keeps once empty (8 KB).
const keptQueueJobs = 1024

func newQueue(limit int) *queue {
	return &queue{limit: limit, ready: make(chan struct{}, 1)}
}

// reserve promises room for one job, to be filled by commit or given back by release. It
// reports false when the queue is full or closed.
func (q *queue) reserve() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.jobs)-q.head+q.reserved >= q.limit {
		return false
	}
	q.reserved++
	return true
}

// commit puts j in the room reserve promised.
func (q *queue) commit(j *job) {
	q.mu.Lock()
	q.reserved--
	if q.head > 0 && len(q.jobs) == cap(q.jobs) {
		// Full, with room at the front: the waiting jobs move there rather than to a
		// larger array.
		n := copy(q.jobs, q.jobs[q.head:])
		clear(q.jobs[n:])
		q.jobs, q.head = q.jobs[:n], 0
	}
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.wake()
}

// release gives back the room reserve promised, for a job that will not come.
func (q *queue) release() {
	q.mu.Lock()
	q.reserved--
	q.mu.Unlock()
	q.wake()
}

// take returns the oldest job, waiting for one; false once the queue is closed and empty.
func (q *queue) take() (job, bool) {
	for {
		q.mu.Lock()
		if q.head < len(q.jobs) {
			j := q.jobs[q.head]
			q.jobs[q.head] = nil
			q.head++
			if q.head == len(q.jobs) {
				// Let a large burst's array go rather than keep it for good.
				q.jobs, q.head = q.jobs[:0], 0
				if cap(q.jobs) > keptQueueJobs {
					q.jobs = nil
				}
			}
			q.mu.Unlock()
			return *j, true
		}
		done := q.closed && q.reserved == 0
		q.mu.Unlock()
		if done {
			return job{}, false
		}
		<-q.ready
	}
}

// close stops the queue taking jobs; take returns what is left, then reports the end.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *queue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// allowed applies Config.AllowedChannels.
func (s *session) allowed(channel string) bool {
	ch := s.a.cfg.AllowedChannels
	return len(ch) == 0 || slices.Contains(ch, channel)
}

// process hands one job to the bot and shows the result's notice to the person.
func (s *session) process(j job) {
	ctx := s.work
	if err := ctx.Err(); err != nil {
		s.a.log.Error("slack: acknowledged event dropped at shutdown", "event", j.ev.ID, "kind", j.ev.Kind)
		return
	}
	if j.prompts {
		s.a.suggestPrompts(ctx, j.ev.Thread)
		return
	}
	if j.reason != nil {
		err := s.a.openReason(ctx, *j.reason)
		if err == nil {
			return // the modal's submission is the click
		}
		s.a.log.Warn("slack: reason modal not opened; the click counts without a reason", "event", j.ev.ID, "err", logSafe(err))
	}
	if j.goal != "" && j.ev.Thread.Thread == "" {
		ts, err := s.postRoot(ctx, j)
		if err != nil {
			s.a.log.Warn("slack: post /loopbot root message", "event", j.ev.ID, "channel", j.ev.Thread.Channel, "err", logSafe(err))
			s.notice(ctx, j, "I could not post in this channel. Invite me first (`/invite @loopbot`), then try again.")
			return
		}
		j.ev.Thread.Thread = ts
	}
	if j.historyBefore != "" {
		h, err := s.a.threadHistory(ctx, s.self, j.ev.Thread.Channel, j.ev.Thread.Thread, j.historyBefore)
		if err != nil {
			// The run still starts, without what was said before it was asked.
			s.a.log.Warn("slack: fetch thread history", "event", j.ev.ID, "channel", j.ev.Thread.Channel, "err", logSafe(err))
		} else {
			j.ev.History = h
		}
	}
	res, err := s.h.Handle(ctx, j.ev)
	if err != nil {
		// Slack has the ack and will not deliver this again: the person must hear that
		// nothing was taken, or they wait for a run that never starts.
		s.a.log.Error("slack: handle event", "event", j.ev.ID, "kind", j.ev.Kind, "err", logSafe(err))
		s.notice(ctx, j, noticeHandleFailed)
		return
	}
	if res.Notice != "" {
		s.notice(ctx, j, res.Notice)
	}
}

// noticeHandleFailed tells the acting user that the bot could not take an event in.
const noticeHandleFailed = "loopbot could not take this in. Please try again in a moment."

// postRoot posts "<@user> asked: goal" in the channel: the root of the thread a /loopbot
// run lives in. The user's mention is the one markup loopbot writes itself.
func (s *session) postRoot(ctx context.Context, j job) (string, error) {
	text := fmt.Sprintf("<@%s> asked: %s", j.ev.User.ID, clipMrkdwn(escape(j.goal), maxSectionText-40))
	_, ts, err := s.a.api.PostMessageContext(ctx, j.ev.Thread.Channel,
		slack.MsgOptionText(text, false), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
	if err != nil {
		return "", classify("post root message", err)
	}
	return ts, nil
}

// notice shows text to the acting user alone: through the slash command's response_url
// when there is one (it works in channels the bot is not in), else chat.postEphemeral in
// the thread.
func (s *session) notice(ctx context.Context, j job, text string) {
	var err error
	if j.responseURL != "" {
		_, _, err = s.a.api.PostMessageContext(ctx, j.ev.Thread.Channel,
			slack.MsgOptionResponseURL(j.responseURL, slack.ResponseTypeEphemeral),
			slack.MsgOptionText(clipMrkdwn(escape(text), maxSectionText), false))
	} else {
		err = s.a.Notify(ctx, j.ev.Thread, j.ev.User.ID, text)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.a.log.Warn("slack: notice to user", "event", j.ev.ID, "user", j.ev.User.ID, "err", logSafe(err))
	}
}

// fromEvent turns a decoded Events API callback into a job, or nothing.
func (s *session) fromEvent(body []byte) (job, bool) {
	cb, m, err := decodeCallback(body)
	if err != nil {
		s.a.log.Warn("slack: undecodable event acknowledged and dropped", "err", logSafe(err))
		return job{}, false
	}
	return s.fromCallback(body, cb, m)
}

// fromCallback is fromEvent of body already decoded into cb and m.
func (s *session) fromCallback(body []byte, cb callback, m message) (job, bool) {
	if cb.Type != "event_callback" {
		return job{}, false
	}
	if m.Type != "assistant_thread_started" {
		return s.fromMessage(cb, m)
	}
	if id, thread, ok, err := decodeThreadStarted(body); ok || err != nil {
		if err != nil {
			s.a.log.Warn("slack: undecodable event acknowledged and dropped", "err", logSafe(err))
		}
		if !ok || !s.a.cfg.Assistant || !s.allowed(thread.Channel) {
			return job{}, false
		}
		return job{ev: bot.Event{ID: id, Thread: thread}, prompts: true}, true
	}
	return job{}, false
}

// fromMessage turns a decoded message event into a job, or nothing.
func (s *session) fromMessage(cb callback, m message) (job, bool) {
	ev, ts, ok, err := messageOf(cb, m, s.self)
	switch {
	case err != nil:
		s.a.log.Warn("slack: undecodable event acknowledged and dropped", "err", logSafe(err))
		return job{}, false
	case !ok:
		return job{}, false
	case !s.allowed(ev.Thread.Channel):
		s.a.log.Debug("slack: event from a channel not allowed", "channel", ev.Thread.Channel, "event", ev.ID)
		return job{}, false
	}
	j := job{ev: ev}
	if ev.Kind == bot.EventMention && ev.Thread.Thread != ts {
		j.historyBefore = ts
	}
	return j, true
}

// fromInteraction turns a decoded interactivity payload into a job, or nothing.
func (s *session) fromInteraction(body []byte) (job, bool) {
	ev, ok, err := decodeInteraction(body)
	switch {
	case err != nil:
		s.a.log.Warn("slack: undecodable interaction acknowledged and dropped", "err", logSafe(err))
		return job{}, false
	case !ok:
		return job{}, false
	case !s.allowed(ev.Thread.Channel):
		s.a.log.Debug("slack: click in a channel not allowed", "channel", ev.Thread.Channel, "event", ev.ID)
		return job{}, false
	}
	s.ownTeam(&ev)
	j := job{ev: ev}
	if rc, ok := askedReason(body, ev); ok {
		j.reason = &rc
	}
	return j, true
}

// notAllowedText answers a slash command in a channel loopbot does not serve.
const notAllowedText = "loopbot is not enabled in this channel."

// fromCommand turns a slash command into a job, or into a reply to give in the
// acknowledgement.
func (s *session) fromCommand(sc slashCommand) (j job, reply string, ok bool) {
	c, err := decodeCommand(sc, s.a.cfg.Command)
	switch {
	case err != nil:
		s.a.log.Warn("slack: undecodable slash command acknowledged and dropped", "err", logSafe(err))
		return job{}, "", false
	case c.reply != "":
		return job{}, c.reply, false
	case !s.allowed(c.ev.Thread.Channel):
		return job{}, notAllowedText, false
	}
	s.ownTeam(&c.ev)
	return job{ev: c.ev, goal: c.goal, responseURL: c.responseURL}, "", true
}

// ownTeam names ev's thread by the workspace the app is installed in. In a Slack Connect
// channel the team a click or command carries is the clicker's organisation, which differs
// from member to member; the thread must be one key for all of them, and the same key as
// its events (which decodeEvent names by the installation too).
func (s *session) ownTeam(ev *bot.Event) {
	if s.self.TeamID != "" {
		ev.Thread.Workspace = s.self.TeamID
	}
}

// ephemeral is the body of an acknowledgement that answers a slash command at once.
func ephemeral(text string) map[string]string {
	return map[string]string{"response_type": slack.ResponseTypeEphemeral, "text": escape(text)}
}
