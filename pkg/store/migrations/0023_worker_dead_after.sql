-- Each worker's own workers.dead_after, in milliseconds (0: a row of an
-- earlier version). A worker stops its steps by its own dead_after once its
-- heartbeats stop landing (its cut-off), so it is declared dead only once
-- the larger of its own and the declaring worker's dead_after has passed:
-- workers configured differently never take over a live one's deploys.
ALTER TABLE manent_workers ADD COLUMN dead_after_ms BIGINT NOT NULL DEFAULT 0;
