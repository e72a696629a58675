-- The store's first schema. Records keep their JSON (the same encoding
-- bbolt's store keeps) in doc; what is looked up, ordered or locked has a
-- column of its own. Text keys sort as bytes (COLLATE "C"), as bbolt's do.

-- +goose Up
CREATE TABLE services (
	id text COLLATE "C" PRIMARY KEY,
	doc bytea NOT NULL
);
CREATE TABLE branches (
	id text COLLATE "C" PRIMARY KEY,
	service_id text COLLATE "C" NOT NULL,
	doc bytea NOT NULL
);
CREATE INDEX branches_by_service ON branches (service_id, id);
-- Deleted branches stay deleted: the seed, loaded at every start, does not
-- bring them back.
CREATE TABLE branches_deleted (
	id text COLLATE "C" PRIMARY KEY,
	deleted_at timestamptz NOT NULL
);
CREATE TABLE keys (
	digest text COLLATE "C" PRIMARY KEY,
	branch_id text COLLATE "C" NOT NULL
);
CREATE SEQUENCE b2b_seq;
CREATE TABLE b2b_clients (
	key_digest text COLLATE "C" PRIMARY KEY,
	seq bigint NOT NULL UNIQUE,
	service_id text COLLATE "C" NOT NULL,
	doc bytea NOT NULL
);
CREATE INDEX b2b_clients_by_service ON b2b_clients (service_id, seq);
CREATE TABLE accounts (
	id text COLLATE "C" PRIMARY KEY,
	service_id text COLLATE "C" NOT NULL,
	doc bytea NOT NULL
);
CREATE INDEX accounts_by_service ON accounts (service_id, id);
CREATE TABLE conditions (
	branch_id text COLLATE "C" PRIMARY KEY,
	doc bytea NOT NULL
);
-- Quota counters: 's/' service id and 'b/' branch id, as bbolt keys them.
-- A verification locks its two rows before it reads what it decides on.
CREATE TABLE counters (
	scope text COLLATE "C" PRIMARY KEY,
	period bigint NOT NULL DEFAULT 0,
	used bigint NOT NULL DEFAULT 0,
	total bigint NOT NULL DEFAULT 0
);
-- The duplicate registry: one record per service and slip.
CREATE TABLE slips (
	service_id text COLLATE "C" NOT NULL,
	slip_key text COLLATE "C" NOT NULL,
	first_at bigint NOT NULL,
	job text NOT NULL,
	branches text[] NOT NULL,
	result bytea NOT NULL,
	-- ref is the transaction reference: the key without its kind and
	-- sending bank (bank/004/REF, wallet/REF).
	ref text COLLATE "C" GENERATED ALWAYS AS (CASE WHEN slip_key LIKE 'bank/%'
		THEN substr(slip_key, length(split_part(slip_key, '/', 2)) + 7) ELSE substr(slip_key, 8) END) STORED,
	PRIMARY KEY (service_id, slip_key)
);
CREATE INDEX slips_by_age ON slips (first_at);
CREATE INDEX slips_by_ref ON slips (service_id, ref);
CREATE TABLE history (
	service_id text COLLATE "C" NOT NULL,
	branch_id text COLLATE "C" NOT NULL,
	at_ms bigint NOT NULL,
	slip_key text COLLATE "C" NOT NULL,
	amount double precision NOT NULL,
	receiving_bank text NOT NULL,
	duplicate boolean NOT NULL,
	amount_matched boolean NOT NULL,
	date_matched boolean,
	remark text NOT NULL,
	job_id text NOT NULL,
	PRIMARY KEY (service_id, branch_id, at_ms, slip_key)
);
CREATE INDEX history_newest ON history (service_id, at_ms DESC, branch_id DESC, slip_key DESC);
CREATE INDEX history_by_slip ON history (service_id, slip_key);
CREATE TABLE nonces (
	service_id text COLLATE "C" NOT NULL,
	value text COLLATE "C" NOT NULL,
	forget_minute bigint NOT NULL, -- Unix minutes
	PRIMARY KEY (service_id, value, forget_minute)
);
CREATE INDEX nonces_by_age ON nonces (forget_minute);
CREATE TABLE jobs (
	id text COLLATE "C" PRIMARY KEY,
	service_id text COLLATE "C" NOT NULL,
	branch_id text COLLATE "C" NOT NULL,
	created bigint NOT NULL, -- Unix ms
	due_at bigint, -- Unix ms
	unfinished boolean NOT NULL,
	doc bytea NOT NULL
);
CREATE INDEX jobs_due ON jobs (due_at, id) WHERE due_at IS NOT NULL;
CREATE INDEX jobs_by_age ON jobs (created, id);
CREATE INDEX jobs_unfinished ON jobs (service_id, branch_id) WHERE unfinished;
-- The outbox: seq is handed out from outbox_next's one row, whose lock
-- each writing transaction holds to its commit, so messages are numbered
-- in the order their transactions commit.
CREATE TABLE outbox (
	seq bigint PRIMARY KEY,
	topic text NOT NULL,
	key bytea NOT NULL, -- as Kafka's: any bytes
	value bytea NOT NULL
);
CREATE TABLE outbox_next (last bigint NOT NULL);
INSERT INTO outbox_next VALUES (0);
CREATE TABLE audit (
	seq bigserial PRIMARY KEY,
	at_ms bigint NOT NULL,
	service_id text COLLATE "C" NOT NULL,
	action text NOT NULL,
	doc bytea NOT NULL
);
CREATE INDEX audit_by_time ON audit (at_ms, seq);
CREATE TABLE admin_tokens (
	id text COLLATE "C" PRIMARY KEY,
	digest text COLLATE "C" NOT NULL UNIQUE,
	doc bytea NOT NULL
);
-- A transaction's mark, read back when its COMMIT's outcome is unknown.
CREATE TABLE commits (
	id uuid PRIMARY KEY,
	at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE services, branches, branches_deleted, keys, b2b_clients, accounts, conditions, counters, slips,
	history, nonces, jobs, outbox, outbox_next, audit, admin_tokens, commits;
DROP SEQUENCE b2b_seq;
