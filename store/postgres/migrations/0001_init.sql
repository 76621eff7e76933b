-- The first schema: every record is the JSON of loopbot's own type, stored as bytes (bytea,
-- so PostgreSQL neither reparses nor reorders it), beside the columns that queries select
-- and order by. Keys compare byte by byte (COLLATE "C"), as bbolt's do, whatever the
-- database's locale.

-- Runs list in creation order: seq is taken from a sequence when a run is first put.
-- data is the whole record, head the record without its agent state (RunHeader), thread the
-- JSON of its ThreadRef (for the thread filter).
CREATE TABLE runs (
	seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id     text COLLATE "C" NOT NULL UNIQUE,
	status text COLLATE "C" NOT NULL,
	thread text COLLATE "C" NOT NULL,
	head   bytea NOT NULL,
	data   bytea NOT NULL
);
CREATE INDEX runs_status ON runs (status, seq);
CREATE INDEX runs_thread ON runs (thread, seq);

-- The two lists of a run's state that grow with every step, its messages (kind 'm') and its
-- call records (kind 'c'), one row per element, so that a checkpoint writes what the step
-- added or changed rather than the whole conversation again (items.go). runs.data holds
-- the state without them.
CREATE TABLE run_items (
	run_id text COLLATE "C" NOT NULL,
	kind   "char" NOT NULL,
	idx    integer NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (run_id, kind, idx)
);

-- Records read and written by key alone: conversations, button actions, and whatever small
-- record type comes next. bucket names the type.
CREATE TABLE records (
	bucket text COLLATE "C" NOT NULL,
	key    text COLLATE "C" NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (bucket, key)
);

CREATE TABLE approvals (
	id     text COLLATE "C" PRIMARY KEY,
	run_id text COLLATE "C" NOT NULL,
	status text COLLATE "C" NOT NULL,
	data   bytea NOT NULL
);
CREATE INDEX approvals_run ON approvals (run_id);
CREATE INDEX approvals_status ON approvals (status);

-- Audit entries list by time (nanoseconds since 1970), then in the order appended.
CREATE TABLE audit (
	seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at_ns  bigint NOT NULL,
	run_id text COLLATE "C" NOT NULL,
	data   bytea NOT NULL
);
CREATE INDEX audit_order ON audit (at_ns, seq);
CREATE INDEX audit_run ON audit (run_id, at_ns, seq);

CREATE TABLE outbox (
	key  text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL
);

-- An event claim is live while now is before expires_ns.
CREATE TABLE events (
	id         text COLLATE "C" PRIMARY KEY,
	expires_ns bigint NOT NULL
);
CREATE INDEX events_expiry ON events (expires_ns);

-- Records that did not decode, moved aside (quarantine.go).
CREATE TABLE quarantine (
	seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	bucket text NOT NULL,
	key    text NOT NULL,
	data   bytea NOT NULL,
	reason text NOT NULL,
	at     timestamptz NOT NULL
);
