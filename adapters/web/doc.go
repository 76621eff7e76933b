// Package web is loopbot's local web console: a third platform next to Slack and Discord,
// served from the bot's own process and going through exactly the same bot code path.
//
// A person opens the console in a browser, types a goal, and watches the run's messages
// arrive: the status card edited in place, the plan ticking, approval cards with Approve and
// Reject, failure summaries and the answer. A reply box continues the thread or answers the run's question.
//
// The adapter keeps the console's threads and their messages in memory, bounded by
// Config.MaxThreads and Config.MaxMessages, and with WithViewStore in the bot's store
// (viewstore.go), which every replica's console follows through the store's notifications,
// so that a person may use any replica; with WithHistory alone, in a file of its own
// (history.go). From either it rebuilds them after a restart: titles, messages in their
// order, cards as last shown. They are the console's view only: the runs themselves are
// durable in the bot's store, and the bot's edits after a restart find the messages they
// edit. Without either, the bot's next post or edit recreates the thread it goes to.
// Each message is shown as a chat row: the author's initials as an avatar, their name and
// the time. A question's buttons go once the bot has taken a click on one of them (the bot
// edits status and approval cards itself, never a question). Outside the reply box, the
// keys A and R press the latest pending approval's Approve and Reject.
//
// Messages reach browsers as server-sent events, one EventSource per open page. Post and
// Update never wait for a browser: a subscriber whose buffer is full is dropped, and its
// EventSource reconnects with Last-Event-ID and receives every message that changed since
// (or a full snapshot when the ID is from another process).
//
// Messages are rendered to HTML on the server: everything is escaped, and the Markdown of
// the model's text, read by package bot/text's tokenizer, is turned into a small allowlist
// of elements (paragraphs, emphasis, strike-through, code, code blocks, lists, quotes, and
// links to http and https only). An approval's arguments that hold text of several lines,
// as write_file's content does, are shown as that text in a code block. Pages carry a strict
// Content-Security-Policy with no inline script, so even a rendering mistake cannot run
// code.
//
// Security: who a request comes from is decided by its credential only (identity.go); a
// name in a body or query string is ignored. With no Config.Users and no
// Config.TrustedProxies the console is one person, "web:you": it listens on loopback by
// default and then needs no token, but answers only to loopback host names, so a web page
// cannot reach it through DNS rebinding; a shared Config.Token makes every holder that one
// person. Approver rules that need two people cannot be enforced there: New warns (and
// every page says so) on loopback, and refuses an exposed console with a shared token.
// With Config.Users each person signs in with their own token (a cookie set by opening
// /?token=... once, or Authorization: Bearer), compared in constant time; with
// Config.TrustedProxies an authenticating proxy names the person in a header believed only
// from the proxy's addresses. The user ID is "web:" + name. A person sees the threads they
// started (a thread's ID carries a hash of its owner, so this survives a restart) unless
// they are one of the bot's approvers or Config.Viewers, or Config.Threads is "all"; a
// notice reaches only its person's pages. Bound beyond loopback the console refuses to
// start without users, a proxy or a token. POST endpoints accept JSON only, require the
// X-Loopbot: 1 header and are protected against cross-origin requests.
package web
