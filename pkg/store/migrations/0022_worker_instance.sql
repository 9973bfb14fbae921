-- Which process holds a worker's row (SPEC §11.3). instance is a random
-- token each process draws when it starts: a heartbeat counts only for the
-- process that registered last, so a process whose executor id another one
-- took fences itself. seat says where the process runs (host and the lock
-- file on its data_dir): a process starting with the same seat, holding
-- that lock, knows the previous one is dead without waiting for
-- workers.dead_after. NULL: a row of an earlier version.
ALTER TABLE manent_workers ADD COLUMN instance TEXT;
ALTER TABLE manent_workers ADD COLUMN seat TEXT;
