package discord

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

var _ bot.Platform = (*Adapter)(nil)

// Permissions is what the bot needs in a channel: View Channel, Send Messages, Send
// Messages in Threads, Create Public Threads, Read Message History, Use Application
// Commands, Embed Links and Attach Files.
const Permissions int64 = discordgo.PermissionViewChannel |
	discordgo.PermissionSendMessages |
	discordgo.PermissionSendMessagesInThreads |
	discordgo.PermissionCreatePublicThreads |
	discordgo.PermissionReadMessageHistory |
	discordgo.PermissionUseApplicationCommands |
	discordgo.PermissionEmbedLinks |
	discordgo.PermissionAttachFiles

// InviteURL is the link that adds the bot to a server with its commands and Permissions.
func InviteURL(applicationID string) string {
	q := url.Values{
		"client_id":   {applicationID},
		"permissions": {fmt.Sprint(Permissions)},
		"scope":       {"bot applications.commands"},
	}
	return "https://discord.com/oauth2/authorize?" + q.Encode()
}

// tokenLife is how long an interaction token is used for ephemeral follow-ups; Discord
// accepts it for fifteen minutes.
const tokenLife = 14 * time.Minute

// eventTimeout bounds the work on one inbound event after its acknowledgement.
const eventTimeout = 30 * time.Second

// Adapter is loopbot's Discord platform. Build it with New and run it with Run.
type Adapter struct {
	cfg Config
	s   *discordgo.Session
	// gatewayUsed is set once s has held a gateway connection (run.go's connect).
	gatewayUsed atomic.Bool
	pubKey      ed25519.PublicKey // HTTP mode only
	now         func() time.Time
	log         *slog.Logger

	mu      sync.Mutex
	botID   string
	running bool
	closed  bool // no new event work is started
	// channels caches what each channel is, so a message is matched to a run's thread
	// without a lookup per message. It is emptied when it grows past maxCachedChannels.
	channels map[string]channelInfo
	// tokens are the latest interaction of a user in a thread, for ephemeral notices.
	tokens map[string]recentInteraction
	// partial remembers how far a Post of several messages got when a later part failed
	// with an error worth retrying, by thread and content, so the bot's retry does not post
	// the first parts again. It is emptied when it grows past maxPartial.
	partial map[string]partialPost
	work    sync.WaitGroup
}

// maxCachedChannels bounds the channel cache.
const maxCachedChannels = 10000

// partialPost is how far an earlier attempt of a Post got: the parts already in the thread
// and the reference so far.
type partialPost struct {
	posted int
	ref    string
}

// maxPartial bounds the partial posts remembered.
const maxPartial = 1000

type recentInteraction struct {
	it *discordgo.Interaction
	at time.Time
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock that checks HTTP interaction timestamps and the age of
// interaction tokens.
func WithClock(now func() time.Time) Option { return func(a *Adapter) { a.now = now } }

// WithLogger sets the logger of what the chat user does not see.
func WithLogger(l *slog.Logger) Option { return func(a *Adapter) { a.log = l } }

// New builds an Adapter from cfg. It does not connect: Run does.
//
// The REST base URL is set per adapter (an http.RoundTripper rewrites discordgo's URLs), not
// through discordgo's package-level Endpoint variables, so adapters for different Discords
// can live in one process and tests can run side by side.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	cfg, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("discord config: %w", err)
	}
	a := &Adapter{
		cfg:      cfg,
		now:      time.Now,
		log:      slog.Default(),
		channels: map[string]channelInfo{},
		tokens:   map[string]recentInteraction{},
		partial:  map[string]partialPost{},
	}
	if cfg.Mode == ModeHTTP {
		a.pubKey, _ = parsePublicKey(cfg.PublicKey) // checked above
	}
	for _, o := range opts {
		o(a)
	}
	s, err := a.newSession()
	if err != nil {
		return nil, err
	}
	a.s = s
	return a, nil
}

// newSession returns a discordgo session set up for the adapter, with no gateway session.
func (a *Adapter) newSession() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + a.cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("discord session: %w", err)
	}
	tr := &transport{next: http.DefaultTransport}
	if a.cfg.APIURL != "" {
		tr.base, _ = url.Parse(a.cfg.APIURL) // checked by New
	}
	s.Client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.StateEnabled = false
	// Handlers run on the gateway's read loop, in order: READY is seen before the first
	// message, and each event's work is started on its own goroutine by the adapter.
	s.SyncEvents = true
	s.ShouldReconnectOnError = true
	s.Identify.Intents = intents(a.cfg.MessageContent)
	s.LogLevel = discordgo.LogError
	return s, nil
}

// intents are the gateway intents the adapter asks for.
func intents(messageContent bool) discordgo.Intent {
	i := discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	if messageContent {
		i |= discordgo.IntentsMessageContent
	}
	return i
}

// Name is "discord".
func (a *Adapter) Name() string { return platformName }

// PacedPerThread tells the bot to pace calls per thread: a Discord thread is a channel with
// rate limits of its own, so one busy thread need not slow its siblings.
func (a *Adapter) PacedPerThread() bool { return true }

// Post sends msg to the thread with the bot token. A text longer than one message goes out
// as several, and the reference names the one carrying the buttons (or the first). If a
// later part fails with an error the bot retries (a 429, a 5xx), the retry of the same
// message posts only the parts that are not in the thread yet.
func (a *Adapter) Post(ctx context.Context, thread bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	parts := render(msg)
	var key string
	var done partialPost
	if len(parts) > 1 {
		key = partialKey(thread.Thread, parts)
		a.mu.Lock()
		done = a.partial[key]
		a.mu.Unlock()
	}
	ref := bot.MessageRef{Thread: thread, ID: done.ref}
	for i := done.posted; i < len(parts); i++ {
		m, err := a.send(ctx, thread.Thread, parts[i])
		if err != nil {
			var perm *bot.PermanentError
			if i > 0 && !errors.As(err, &perm) {
				a.mu.Lock()
				if len(a.partial) >= maxPartial {
					clear(a.partial)
				}
				a.partial[key] = partialPost{posted: i, ref: ref.ID}
				a.mu.Unlock()
			}
			return bot.MessageRef{}, fmt.Errorf("post %s: %w", msg.Kind, err)
		}
		if ref.ID == "" || len(parts[i].Components) > 0 {
			ref.ID = m.ID
		}
	}
	if done.posted > 0 {
		a.mu.Lock()
		delete(a.partial, key)
		a.mu.Unlock()
	}
	return ref, nil
}

// partialKey names a message of several parts in a channel by its content.
func partialKey(channelID string, parts []outgoing) string {
	h := sha256.New()
	io.WriteString(h, channelID)
	enc := json.NewEncoder(h)
	for _, p := range parts {
		// outgoing marshals to plain JSON (the golden files are made of it); an error
		// would only make the key less specific.
		_ = enc.Encode(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Update replaces a posted message in place, buttons included (none removes them).
func (a *Adapter) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	out := renderOne(msg)
	components := out.Components
	if components == nil {
		components = []discordgo.MessageComponent{}
	}
	embeds := out.Embeds
	if embeds == nil {
		embeds = []*discordgo.MessageEmbed{}
	}
	edit := &discordgo.MessageEdit{
		ID:              ref.ID,
		Channel:         ref.Thread.Thread,
		Content:         &out.Content,
		Embeds:          &embeds,
		Components:      &components,
		AllowedMentions: out.AllowedMentions,
		Files:           files(out.File),
	}
	_, err := call(ctx, "edit message", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
		return a.s.ChannelMessageEditComplex(edit, opts...)
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", msg.Kind, err)
	}
	return nil
}

// Notify shows text to one user. Discord has ephemeral messages only as interaction
// follow-ups, so while the user's latest interaction in the thread is fresh the notice is
// one; otherwise it is posted in the thread, mentioning (and pinging) that user alone.
func (a *Adapter) Notify(ctx context.Context, thread bot.ThreadRef, userID, text string) error {
	a.mu.Lock()
	recent, ok := a.tokens[thread.Key()+"/"+userID]
	a.mu.Unlock()
	if ok && a.now().Sub(recent.at) < tokenLife {
		err := a.followup(ctx, recent.it, text)
		if err == nil {
			return nil
		}
		var perm *bot.PermanentError
		if !errors.As(err, &perm) {
			return fmt.Errorf("notify: %w", err)
		}
		// The token is dead after all: say it in the thread instead.
	}
	if err := a.mention(ctx, thread, userID, text); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// mention posts note in the thread, addressed to one user.
func (a *Adapter) mention(ctx context.Context, thread bot.ThreadRef, userID, note string) error {
	out := outgoing{
		Content:         text.ClipBytes("<@"+userID+"> "+escape(note), maxContent),
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, Users: []string{userID}},
	}
	_, err := a.send(ctx, thread.Thread, out)
	return err
}

// send posts one message to a channel with the bot token.
func (a *Adapter) send(ctx context.Context, channelID string, o outgoing) (*discordgo.Message, error) {
	ms := &discordgo.MessageSend{
		Content:         o.Content,
		Embeds:          o.Embeds,
		Components:      o.Components,
		AllowedMentions: o.AllowedMentions,
		Files:           files(o.File),
	}
	return call(ctx, "send message", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
		return a.s.ChannelMessageSendComplex(channelID, ms, opts...)
	})
}

// followup sends an ephemeral follow-up to an interaction.
func (a *Adapter) followup(ctx context.Context, it *discordgo.Interaction, note string) error {
	params := &discordgo.WebhookParams{
		Content:         text.ClipBytes(escape(note), maxContent),
		Flags:           discordgo.MessageFlagsEphemeral,
		AllowedMentions: noMentions(),
	}
	_, err := call(ctx, "ephemeral follow-up", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
		return a.s.FollowupMessageCreate(it, true, params, opts...)
	})
	return err
}

func files(f *attachment) []*discordgo.File {
	if f == nil {
		return nil
	}
	return []*discordgo.File{{Name: f.Name, ContentType: "text/markdown; charset=utf-8", Reader: strings.NewReader(f.Content)}}
}

// commands are the application commands loopbot registers.
func commands() []*discordgo.ApplicationCommand {
	return []*discordgo.ApplicationCommand{
		{
			Name:        cmdStart,
			Description: "Give loopbot a goal; it works on it in a new thread",
			Options: []*discordgo.ApplicationCommandOption{{
				Type:        discordgo.ApplicationCommandOptionString,
				Name:        optGoal,
				Description: "What loopbot should do",
				Required:    true,
				MaxLength:   4000,
			}},
		},
		{Name: cmdStatus, Description: "Show loopbot's runs in this thread"},
		{Name: cmdCancel, Description: "Cancel the run in this thread"},
		autonomyCommand(),
		{Name: cmdGrants, Description: "List loopbot's grants in this channel, with Revoke buttons"},
	}
}

// registerCommands overwrites the application's commands: in each configured guild, or
// globally when none is configured. Overwriting makes registration idempotent, and removes
// commands an older version registered.
func (a *Adapter) registerCommands(ctx context.Context) error {
	guilds := a.cfg.GuildIDs
	if len(guilds) == 0 {
		guilds = []string{""}
	}
	for _, g := range guilds {
		_, err := call(ctx, "register commands", func(opts ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error) {
			return a.s.ApplicationCommandBulkOverwrite(a.cfg.ApplicationID, g, commands(), opts...)
		})
		if err != nil {
			if g != "" {
				return fmt.Errorf("guild %s: %w", g, err)
			}
			return err
		}
	}
	return nil
}
