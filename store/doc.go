// Package store keeps loopbot's durable state in one bbolt file: it is the bbolt
// implementation of bot.Store.
//
// Open takes the file's lock with a timeout, so a second loopbot process started on the same
// file fails at once with ErrLocked instead of hanging. Update and View are bbolt's
// transactions behind the bot.Tx interface: Update is serialisable, so a read, check and
// write inside one function is a compare-and-set.
//
// # Layout
//
// Every value is JSON of loopbot's own types (bot and agent), never of a library's, so an
// upgrade of bbolt or of anything else never changes what is on disk. The buckets:
//
//	conversations   ThreadRef.Key() -> bot.Conversation
//	runs            8-byte creation sequence -> bot.RunRecord (its agent.State without
//	                Messages and Calls)
//	run_ids         run ID -> key in runs
//	run_heads       key in runs -> bot.RunRecord without its State (nil)
//	runs_by_status  status + NUL + key in runs -> run ID
//	run_items       key in runs + 'm' or 'c' + 4-byte index -> one agent.Message or
//	                agent.CallRecord of the run's state
//	approvals       approval ID -> bot.Approval
//	actions         button action ID -> bot.Action
//	events          delivery ID -> expiry of its claim
//	event_expiry    8-byte expiry time + delivery ID -> empty (the purge index)
//	audit           8-byte time + 8-byte sequence -> bot.AuditEntry
//	outbox          item key -> bot.OutboxItem
//	feedback        run ID + NUL + user ID -> bot.Feedback (one rating per person per answer)
//	grants          grant ID -> bot.ChannelGrant (channel grants, grants.go)
//	meta            "schema_version" -> 3; "intake_position" -> the intake journal's ID,
//	                generation and offset moved into inbox (intake.go)
//	quarantine      bucket + NUL + key + NUL + 8 bytes of the value's SHA-256 -> Quarantined
//	channel_autonomy bot.ChannelKey -> bot.ChannelAutonomy (a channel's autonomy level)
//	memory          channel key + NUL + fact ID -> bot.MemoryFact (a channel's memory)
//	inbox           event ID -> bot.InboxEntry (accepted and not yet handled, bot/inbox.go;
//	                written through the intake journal, intake.go)
//	console_rows    8-byte number -> a row of the web console's view (console.go)
//	console_keys    thread + NUL + key -> the number of its row in console_rows
//	holds           pace key -> bot.Hold (a channel held by a platform's Retry-After,
//	                kept across restarts; holds.go)
//
// A run's agent state grows with every step, to tens of kilobytes, and encoding/json reads
// all of a value even to decode one field of it. So what is decided on without the state
// has buckets of its own, written by PutRun in the same transaction as the run: run_heads
// for RunHeader and for matching a thread, and runs_by_status, in which the runs of one
// status are one range in creation order, for Runs and RunIDs filtered by status. The bot
// asks for the runs still going whenever one starts or ends; the index makes that as cheap
// with a long history of finished runs as without.
//
// The state's two lists that grow with every step, the messages and the call records, are
// kept in run_items, one record each (runitems.go). PutRun writes only the elements whose
// encoding differs from the stored one, so a checkpoint writes what the step added, not the
// whole conversation again: the bytes a run's checkpoints write grow with its length, not
// with its square. RunBrief, which the dispatcher renders cards from, does not read the
// messages at all, and PutRunHead, which saves a card's reference, rewrites the run's
// record and head without its state's lists.
//
// The one writer runs every run's checkpoint one after another, so what it does for each is
// kept small (encoded.go): the run's goroutine has the state encoded before it queues
// (EncodeState), and PutRun compares those bytes with the stored items in one cursor walk.
// Values are read with encoding/json's rules on encoding/json/v2's implementation (codec.go),
// and Outbox decodes only the items whose bytes changed since it last listed them
// (outboxcache.go).
//
// # Damage
//
// bbolt reads the file through a memory map, so a page past the end of a file cut short is a
// SIGBUS and a page of garbage trips one of bbolt's assertions: either ends the process
// wherever it happens. So Open first opens an existing file read-only and checks it: that
// the metadata's page count fits the file, then every key and value read once, then bbolt's
// own consistency check; with memory faults turned into panics (debug.SetPanicOnFault) and
// every panic into an error wrapping ErrDamaged, which names the file and what to do
// (damage.go). A file that passes is one bbolt can read everywhere. CheckFile does the same
// and more for `loopbot db check`, and Compact packs a file with bbolt's compaction, keeping
// the original at BackupPath. Compact swaps the file while it holds the lock, so Open, once
// granted the lock, checks that the path still names the file it opened, and opens it again
// if not.
//
// A record that is whole but does not decode is quarantined (quarantine.go): in the
// conversations, approvals, actions, audit, outbox and feedback buckets, a getter treats it as absent
// (bot.ErrNotFound) and a scan skips it, so one bad outbox item does not stop the dispatcher;
// once the transaction has ended it is moved to the quarantine bucket in a write of its own,
// and the hook of WithQuarantineHook is told. The quarantine bucket needs no new schema
// version: an older loopbot ignores it, and Open creates it in an older file.
//
// Open writes SchemaVersion into a new file, migrates an older one in the transaction that
// opens it (version 1 lacked run_heads and runs_by_status, which are built from runs;
// version 2 kept the messages and calls inside each run's record), and
// refuses a file with a newer one (ErrSchema). Check runs the checks of Open, verifies that
// the index buckets agree with the buckets they index, both ways, and that every record of
// the quarantinable buckets decodes; tests run it after every test.
//
// # Caveats
//
// The function given to Update runs while holding the database's only write lock: every
// other writer waits until it returns. Do no network I/O and nothing slow inside it; read
// what is needed, decide, write, and post messages afterwards through the outbox.
//
// Writes that arrive while another is being committed are committed together, in one
// transaction with one disk sync (group commit; group.go says how). For a caller that
// means: the function given to Update may run more than once, so it must set whatever it
// sets outside the transaction afresh on every call; it runs in the goroutine of whichever
// caller leads its group, so it must not end its goroutine (t.FailNow in a test), which
// loses that leader's write; and a write that changed nothing costs no sync.
//
// Do not call Update or View from inside the function of another Update or View on the same
// DB: bbolt can deadlock, as the writer waits on itself.
//
// The bot.Tx handed to a function is only valid until that function returns; afterwards
// every call on it fails with ErrTxClosed. Values returned by its getters are decoded
// copies, free to change and put back.
//
// The context is checked before a transaction starts and again once bbolt has granted it,
// but a transaction that has started runs to its end: bbolt cannot be interrupted.
//
// Creation order of runs is the order in which they were first put, not their CreatedAt.
// Times used in keys (audit entries, event expiries) must lie between the years 1678 and
// 2262, the range of UnixNano.
//
// An event claim is live while now is before its expiry; ClaimEvent and PurgeEvents take
// now as a parameter, so the caller's clock decides, and tests need not sleep.
package store
