// Package slack connects loopbot to Slack: it decodes Slack's events, button clicks and
// slash commands into bot.Event, hands them to the bot, and renders bot.Message as Block
// Kit for the bot.Platform methods (Post, Update, Notify).
//
// # Receiving
//
// Socket Mode (the default) needs no public URL: Run opens a websocket with the app-level
// token (apps.connections.open) and reads it on its own loop (socketconn.go), which
// reconnects whenever Slack asks, the socket dies or Slack stops pinging. HTTP mode serves
// the Events API, interactivity and slash commands on one handler, verifying every
// request's signature on its raw body first. Either way each delivery is acknowledged
// first and handled after, so Slack gets its answer within 3 seconds (in Socket Mode the
// workers wait while envelopes read after a job wait for their acks, intake.go); a
// delivery that was acknowledged is handled even if Run is stopping, and one that was not
// is left for Slack to deliver again. Receiving never waits for the bot: a few workers
// handle deliveries, each thread's on one worker and in the order Slack sent them, and
// each worker queues up to 1,024; past that a delivery is not acknowledged (Socket Mode)
// or is answered 503 (HTTP mode), and Slack delivers it again later. Deliveries reach the
// bot as Slack sent them, redeliveries included: Event.ID is Slack's event_id (or the
// click's or command's trigger_id), and the bot dedupes on it.
//
// What becomes which event:
//
//   - @loopbot <goal> in a channel starts a run in the mention's thread (the thread it was
//     typed in, or a new one under the mention): bot.EventMention. "@loopbot status" and
//     "@loopbot cancel" are the status and cancel commands for that thread. A mention in
//     the middle of a thread carries the thread so far in Event.History, fetched by the
//     worker before the bot sees it (conversations.replies up to the mention, the newest
//     bot.MaxHistoryMessages; people named by users.info); a failed fetch is logged and
//     the mention goes on without it.
//   - A message in a thread (channels, private channels, DMs) is a bot.EventReply; the bot
//     ignores it unless it has a conversation in that thread (it started it or was
//     mentioned in it). Replies in a DM are marked Direct: everything there is for the bot.
//     Messages outside threads, deletions and messages from bots (the bot itself included)
//     are dropped.
//   - An edit never starts a run: Slack sends an edited mention again as a new app_mention
//     (new event_id, an "edited" field), and edited messages as message_changed; the
//     adapter drops both.
//   - A direct message to the bot starts a run in a thread under it, or continues one.
//   - /loopbot <goal> posts "<@user> asked: goal" in the channel and starts the run in that
//     message's thread. /loopbot status|cancel <thread link> act on a thread: Slack does not
//     tell apps which thread a command was typed in.
//   - A click on one of loopbot's buttons is a bot.EventAction whose ActionID is the
//     button's value, the opaque ID the bot gave it.
//
// A thread is named by the workspace the app is installed in (auth.test's team, or the
// callback's authorizations[0].team_id), never by the team_id of the delivery: in a Slack
// Connect channel that is the acting member's organisation (slackapi/bolt-js#687,
// slackapi/java-slack-sdk#629), and the same thread must be one conversation for all.
//
// # Rendering
//
// Messages are Block Kit with a plain-text fallback. The model's Markdown, read by package
// bot/text's tokenizer, is converted to mrkdwn and escaped (&, <, >), so it cannot mention anyone or break out of its formatting,
// and @channel, @here and @everyone are kept inert. Every Slack limit is respected: long
// text is cut into 3,000-character sections, at most 13 per message; a longer answer is
// posted as several messages in the thread. Status and approval cards are one message,
// edited in place with chat.update.
//
// # Errors
//
// The Platform methods do not retry or pace: a 429 is returned as *bot.RateLimitError with
// Slack's Retry-After, an error retrying cannot fix (channel_not_found, not_in_channel,
// invalid_blocks, ...) as *bot.PermanentError, and the bot's dispatcher does the rest.
//
// # Configuration
//
// Config is the [slack] section of loopbot's configuration file as it is, toml tags and all.
// CheckOnline tries the bot token with auth.test for `loopbot check -online`, so the command
// needs no Slack client of its own.
//
// Slack's assistant thread status (assistant.threads.setStatus) is not used: it works only
// in AI app threads and needs the assistant:write scope, which loopbot's channel threads
// would not use.
package slack
