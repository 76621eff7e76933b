-- The web console's view (console.go): rows the console writes under a thread and a key,
-- numbered in the order they committed. A row replaced takes the next number (seq) and keeps
-- its position (pos, the number of its first put); a tombstone (a forgotten thread) is the
-- row of key '' with no data. The numbers come from console_seq's one row, which each
-- writer updates and so holds locked until it commits: numbers are given in commit order,
-- and a reader that has seen number n has seen every row numbered below it.
CREATE TABLE console_rows (
	thread text COLLATE "C" NOT NULL,
	key    text COLLATE "C" NOT NULL,
	seq    bigint NOT NULL UNIQUE,
	pos    bigint NOT NULL,
	data   bytea,
	PRIMARY KEY (thread, key)
);

CREATE TABLE console_seq (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	seq bigint NOT NULL
);
INSERT INTO console_seq (one, seq) VALUES (true, 0);
