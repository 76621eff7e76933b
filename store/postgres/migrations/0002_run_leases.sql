-- Run ownership (lease.go): who works on a run, under which epoch, until when. A run's row
-- stays when its lease is released (owner ''), keeping the epoch for the next claim.
CREATE TABLE run_leases (
	run_id     text COLLATE "C" PRIMARY KEY,
	owner      text COLLATE "C" NOT NULL,
	epoch      bigint NOT NULL,
	expires_ns bigint NOT NULL
);
