package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

// Adapter connects loopbot to one Slack workspace: it receives events (Run) and posts,
// edits and whispers messages for the bot (the bot.Platform methods). The Platform
// methods are safe for concurrent use and work without Run.
type Adapter struct {
	cfg  Config
	api  *slack.Client
	log  *slog.Logger
	http *http.Client
	// queueCap, if set, bounds each worker's queue instead of the package's queueCap, so
	// that tests can fill one.
	queueCap int
	// decoded, if set, is told how many decoded envelopes wait for the acker each time one
	// is added to the batch or the acker takes them, so that a test can see a batch form.
	decoded func(waiting int)
	// pingTimeout, if set, replaces socketPingTimeout, so that tests can see a silent
	// connection replaced.
	pingTimeout time.Duration
	// intakeHold, if set, replaces intakeHold, so that tests can hold the workers as long
	// as they need or not at all.
	intakeHold time.Duration
	// status is what each thread's assistant status was last set to (Config.Assistant).
	status statuses
	// streams are the answers being streamed (stream.go).
	streams streams
}

var _ bot.Platform = (*Adapter)(nil)

// Option configures an Adapter.
type Option func(*Adapter)

// WithLogger sets the logger; slog.Default() otherwise.
func WithLogger(l *slog.Logger) Option { return func(a *Adapter) { a.log = l } }

// WithHTTPClient sets the HTTP client of Web API calls; one with a 30s timeout otherwise.
func WithHTTPClient(c *http.Client) Option { return func(a *Adapter) { a.http = c } }

// New checks cfg and builds an Adapter. It does no I/O: the tokens are first used by Run
// (auth.test) or by the first message.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("slack config: %w", err)
	}
	a := &Adapter{cfg: cfg, log: slog.Default(), http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(a)
	}
	apiOpts := []slack.Option{slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(a.http)}
	if cfg.AppToken != "" {
		apiOpts = append(apiOpts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	// slack-go's own retries stay off: the bot's dispatcher paces and retries centrally.
	a.api = slack.New(cfg.BotToken, apiOpts...)
	return a, nil
}

// Name is the platform name in bot.ThreadRef.Platform.
func (a *Adapter) Name() string { return platform }

// Post adds msg to the thread (or the channel, when thread.Thread is empty). Text too long
// for one message is posted as several consecutive messages (no file upload, so no
// files:write scope); the reference is the first one's. If a later part fails, the error
// is returned and a retry posts the earlier parts again: parts hold 39,000 characters, so
// only very long answers have more than one.
func (a *Adapter) Post(ctx context.Context, thread bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	if msg.Kind == bot.KindAnswer {
		if ref, ok := a.finishStream(ctx, thread, msg); ok {
			// The stream was a post in the thread: Slack cleared its status.
			a.status.forget(thread)
			return ref, nil
		}
	}
	parts, err := render(msg, false, a.cfg.Assistant)
	if err != nil {
		return bot.MessageRef{}, &bot.PermanentError{Err: fmt.Errorf("render %s message: %w", msg.Kind, err)}
	}
	ref := bot.MessageRef{Thread: thread}
	for i, p := range parts {
		opts := []slack.MsgOption{
			slack.MsgOptionText(p.Text, false),
			slack.MsgOptionBlocks(p.Blocks...),
			slack.MsgOptionDisableLinkUnfurl(),
			slack.MsgOptionDisableMediaUnfurl(),
		}
		if thread.Thread != "" {
			opts = append(opts, slack.MsgOptionTS(thread.Thread))
		}
		_, ts, err := a.api.PostMessageContext(ctx, thread.Channel, opts...)
		if err != nil {
			return bot.MessageRef{}, classify(fmt.Sprintf("post %s message part %d of %d", msg.Kind, i+1, len(parts)), err)
		}
		if i == 0 {
			ref.ID = ts
		}
	}
	// Slack clears an assistant thread's status when the app posts in it.
	a.status.forget(thread)
	a.threadStatus(ctx, thread, msg)
	return ref, nil
}

// Update replaces a posted message with msg, rendered as one message.
func (a *Adapter) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	parts, err := render(msg, true, a.cfg.Assistant)
	if err != nil {
		return &bot.PermanentError{Err: fmt.Errorf("render %s message: %w", msg.Kind, err)}
	}
	p := parts[0]
	_, _, _, err = a.api.UpdateMessageContext(ctx, ref.Thread.Channel, ref.ID,
		slack.MsgOptionText(p.Text, false), slack.MsgOptionBlocks(p.Blocks...))
	if err != nil {
		return classify("update "+string(msg.Kind)+" message", err)
	}
	a.threadStatus(ctx, ref.Thread, msg)
	return nil
}

// Notify shows text to one user only, in the thread, with chat.postEphemeral.
func (a *Adapter) Notify(ctx context.Context, thread bot.ThreadRef, userID, text string) error {
	opts := []slack.MsgOption{slack.MsgOptionText(clipMrkdwn(escape(text), maxSectionText), false)}
	if thread.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread.Thread))
	}
	if _, err := a.api.PostEphemeralContext(ctx, thread.Channel, userID, opts...); err != nil {
		return classify("post ephemeral notice", err)
	}
	return nil
}

// permanent are the Web API errors that retrying cannot fix: the channel, message or
// token is gone or lacks a permission, or the message itself is wrong.
var permanent = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true,
	"channel_is_archived": true, "msg_too_long": true, "invalid_blocks": true,
	"invalid_blocks_format": true, "no_text": true, "too_many_attachments": true,
	"message_not_found": true, "cant_update_message": true, "edit_window_closed": true,
	"user_not_in_channel": true, "user_not_found": true, "invalid_auth": true,
	"not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "missing_scope": true, "no_permission": true,
	"restricted_action": true, "not_allowed_token_type": true, "ekm_access_denied": true,
	"team_access_not_granted": true, "invalid_arguments": true, "invalid_ts": true,
	"messages_tab_disabled": true, "is_inactive": true,
}

// defaultRetryAfter is the wait asked for when Slack answers 429 without Retry-After.
const defaultRetryAfter = time.Second

// classify maps a Web API error to what the bot's dispatcher acts on: a 429 to
// *bot.RateLimitError with Slack's Retry-After, errors retrying cannot fix to
// *bot.PermanentError; anything else (network, 5xx) is returned wrapped as it is.
func classify(op string, err error) error {
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return fmt.Errorf("%s: %w", op, &bot.RateLimitError{RetryAfter: rl.RetryAfter})
	}
	if se, ok := errors.AsType[slack.SlackErrorResponse](err); ok && permanent[se.Err] {
		return &bot.PermanentError{Err: fmt.Errorf("%s: %w", op, err)}
	}
	if sc, ok := errors.AsType[slack.StatusCodeError](err); ok {
		switch sc.Code {
		case http.StatusTooManyRequests:
			return fmt.Errorf("%s: %w", op, &bot.RateLimitError{RetryAfter: defaultRetryAfter})
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			return &bot.PermanentError{Err: fmt.Errorf("%s: %w", op, err)}
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// whoami asks Slack who the bot is.
func (a *Adapter) whoami(ctx context.Context) (identity, error) {
	r, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return identity{}, fmt.Errorf("auth.test: %w", err)
	}
	return identity{UserID: r.UserID, BotID: r.BotID, TeamID: r.TeamID}, nil
}
