// Package bot is loopbot's domain root: it turns platform-neutral chat events into durable
// agent runs and run events into messages.
//
// # Architecture
//
// Events flow inward and messages flow outward through one path that every platform shares:
//
//	adapters/slack, adapters/discord, adapters/web
//	    decode platform payloads into Event, render Message for the platform,
//	    implement Platform (post, update, ephemeral notice)
//	          |  Event                         ^  Message
//	          v                                |
//	bot   Bot, the front door: New, Handle, Start, Stop
//	      Handle (handle.go): dedupe, policy, start / continue / decide / cancel
//	          -> records (records.go): every rule run inside one Store transaction
//	      scheduler (scheduler.go): one goroutine per active run, agent.Agent.Run with a
//	          checkpoint that saves the state and the outbox record of what to post
//	      dispatcher (dispatcher.go): reads the outbox, renders cards from the stored state
//	          (render.go), paces edits per channel, honours RateLimitError, redacts
//	          secrets, calls Platform
//	      sweeper (sweeper.go): expires approvals nobody decided on, forgets old claims
//	          |
//	          v
//	agent  the loop: State, Model, Tool, budgets, approvals (knows nothing of chat or disks)
//
// Adapters consume the bot through Handler (handler.go), one method that *Bot implements.
// Handle only touches the store, so adapters acknowledge the platform first and still
// answer within its deadline. A delivery is claimed by its ID before anything else, so a
// platform retry never starts a second run. Every decision that changes a run is one
// Update transaction that checks and writes together: a button's Action is looked up by
// its opaque ID, the click must come from the thread and platform the button was drawn in,
// the Approval must still be pending and not expired, the clicker allowed by the Policy
// (policy.go) and the call's arguments unchanged since the request, and the decision, the
// run state, the audit entry and the outbox items commit at once. Of two clicks racing, one
// finds nothing pending.
//
// A reply (EventReply) belongs to the bot only in a thread it has a Conversation in, one it
// started or was mentioned in; anywhere else it is ignored without a word, unless the event
// is Direct (a direct conversation, where everything is for the bot). A mention may carry
// the thread's earlier messages (Event.History, fetched by the adapter); the first run of a
// thread takes them in as history (history.go), the newest MaxHistoryMessages within
// MaxHistoryBytes, people's quoted with their names as outside content, never as the
// requester's words.
//
// The rules that run inside a transaction live in one type, records: creating a run, the
// transition a checkpoint or a decision calls for, requesting approvals, the one settle
// function that serves a person's decision and the sweeper's expiry alike, closing
// approvals, cancelling and failing a run, the thread's next queued goal, and one
// constructor per kind of outbox item. deriveStatus is the only place RunRecord.Status is
// set: the record's status follows its state's. records holds no lock and no state;
// clock.go stamps what it writes in order.
//
// The scheduler is woken whenever a run may have become ready: it starts a goroutine for
// every run stored as queued or running, oldest first, up to Config.MaxConcurrentRuns. A
// goroutine calls agent.Agent.Run; the checkpoint hook stores the state and, by comparing
// the new status with the stored one, what the transition calls for: a refreshed status
// card, approval requests with their buttons, a question, the answer or a failure summary.
// When a run ends, the thread's next queued goal becomes a run that sees the thread's
// earlier goals and answers. A person's cancel reaches a working run as its context's
// cause agent.ErrCancelled, sent after the cancel's audit entry commits (no lock is held
// across that write); Stop cancels with a shutdown cause instead, and the run resumes from
// its checkpoint in the next process. The scheduler's lock guards only its own maps.
//
// The dispatcher is one goroutine that owns all of its state, so it needs no lock. It
// renders every item from the records as they are when it is sent, so a card that waited
// shows the latest state, and status card items share a key per run, so a burst of states
// is one edit. Calls to a channel are spaced Config.EditInterval apart (calls to a thread,
// for a platform that implements ThreadPaced); a RateLimitError holds that channel, and only
// that channel, for its RetryAfter; other failures back off
// per channel and are dropped after a bounded number of attempts, a PermanentError at
// once. A card's first post stores its MessageRef, and later states edit it in place.
// Everything posted goes through the Redactor first.
//
// The Redactor (redact.go) finds secrets with gitleaks's default rules and a few local ones
// (redact_rules.go), each run only near its keywords; matches configured values as written
// and encoded (redact_encoded.go); and scans a view of the text without invisible
// characters and emphasis markers (redact_view.go), mapping what it finds there back to the
// original, so a token split by them is replaced whole.
//
// The package defines the interfaces it consumes (Platform, Store) and holds no third-party
// chat, storage or model types. Package store implements Store on bbolt; cmd/loopbot wires
// everything together.
package bot
