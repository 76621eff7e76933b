// Package discord connects loopbot to Discord through discordgo.
//
// People start runs with the /loopbot slash command or by mentioning the bot in a channel;
// each run lives in its own thread. The adapter answers every interaction with a deferred
// response first (Discord allows three seconds), then creates the thread, hands the event to
// the bot, and shows the bot's notice to the acting user as an ephemeral follow-up.
//
// The run's messages (the status card edited in place, approval cards, the answer) are
// posted and edited with the bot token on the thread's channel routes, never through the
// interaction webhook, whose token dies after fifteen minutes while a run may take hours.
//
// A run that starts where people were already talking (a mention in a channel or in a thread
// the bot did not start, or /loopbot with a goal there) carries what was said before it in
// Event.History: one GET /channels/{id}/messages before the mention or the interaction
// (history.go), the bot's own messages marked, people's with their display names, within
// bot.MaxHistoryMessages and bot.MaxHistoryBytes. A failed fetch is logged and the run starts
// without it. The bot keeps it only for a thread's first run.
//
// Two modes: gateway (the default; a websocket from the bot to Discord, which also delivers
// mentions and thread replies) and HTTP interactions (Discord POSTs signed interactions to a
// public URL; slash commands and buttons only).
//
// The adapter neither paces nor retries what the bot posts. discordgo's own 429 retry sleeps
// without a context, so it is switched off and its bucket pacing is starved of the rate limit
// headers; a 429 is returned as *bot.RateLimitError and a refusal that retrying cannot fix as
// *bot.PermanentError, and the bot's dispatcher does the pacing for every platform at once.
// The one exception is opening a run's thread, which happens after the acknowledgement and
// outside the bot's outbox: it is tried again after a 429's wait, within the event's time.
//
// Config is the [discord] section of loopbot's configuration file as it is, toml tags and
// all. CheckOnline tries the bot token with /users/@me for `loopbot check -online`, so the
// command needs no Discord client or URL of its own.
package discord
