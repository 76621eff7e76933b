// Package postgres keeps loopbot's durable state in a PostgreSQL database: the bot.Store
// that several loopbot replicas can share. It passes the same conformance suite
// (store/storetest) as the bbolt store in package store; package store stays the default
// for one process.
//
// # Layout
//
// Every record is the JSON of loopbot's own type, stored as bytes, beside the columns that
// queries select and order by (migrations/0001_init.sql):
//
//	runs        seq (creation order), id, status, thread, head (no state), data (the
//	            record, its state without messages and calls)
//	run_items   run_id, kind ('m' message, 'c' call), idx -> data (items.go)
//	records     bucket + key -> data: conversations, actions, channel_autonomy, grants, a
//	            "memory:<channel>" bucket per channel, inbox (event ID -> bot.InboxEntry,
//	            inbox.go), leaders (leader.go), holds (pace key -> bot.Hold, holds.go),
//	            and small record types to come
//	approvals   id, run_id, status, data
//	audit       seq, at_ns, run_id, data
//	outbox      key -> data
//	events      id, expires_ns
//	run_leases  run_id, owner, epoch, expires_ns (lease.go)
//	quarantine  records that did not decode (quarantine.go)
//	console_rows  thread, key, seq (commit order), pos, data: the web console's view,
//	            numbered from console_seq's one row (console.go)
//	schema_migrations  the migrations that ran (migrate.go)
//
// A new record type read by key alone needs no migration: it is a new bucket of records.
//
// # Transactions
//
// Update is a READ COMMITTED transaction in which every read locks what it reads (SELECT
// ... FOR UPDATE), lists included, until the transaction ends: a read, check and write is a
// compare-and-set, as in bbolt's serialised writes. A read that finds a key missing is
// remembered, and the put that follows inserts rather than upserts, so that two
// transactions that both found it missing cannot both write it: the second fails with a
// unique violation. Update runs its function again on a serialization failure, a deadlock
// or a unique violation (DefaultMaxAttempts times at most, with a random wait growing each
// time, for as long as the context allows); the function may therefore run more than once,
// as bot.Store allows.
//
// A transaction whose connection was lost before its commit was sent (the server restarted
// or failed over) runs again the same way, on a new connection: nothing of it committed. A
// commit sent and not answered may have committed, so that one fails instead of running
// twice (TestServerRestart).
//
// View is a read-only REPEATABLE READ transaction: its reads share one snapshot.
//
// # Differences from the bbolt store
//
// What the conformance suite checks holds for both. Beyond it:
//
//   - READ COMMITTED with row locks does not stop phantoms: a function that lists rows (say,
//     a run's pending approvals) and inserts one because it found none may race another
//     doing the same. The bot's records are keyed, and a keyed insert after a missing read
//     fails on the key; a check over a list must rest on a keyed record.
//   - bbolt's damage checks (Open's read-only check, CheckFile) and Compact have no
//     counterpart: PostgreSQL keeps its pages whole (WAL, checksums where enabled) and
//     reclaims space itself (autovacuum). Check here verifies the schema version and that
//     every record decodes.
//   - Keys and the columns queries use are PostgreSQL text: one that holds a NUL byte or
//     is not UTF-8 (an event ID, a run ID, a key of the outbox) is refused with an error,
//     where bbolt takes any bytes. The records themselves are bytes, and hold anything.
//   - The context is honoured during a transaction too: a cancelled context ends the
//     statement that runs, and the transaction rolls back.
//   - Do not call Update or View from inside another's function: the pool may have no
//     connection left to give, and two transactions of one caller can deadlock on a row.
//
// The connection URL's password is never in an error or a log line (redact.go).
package postgres
