-- retention.logs and retention.deploys remove a deploy's log lines in
-- transactions of a bounded number of rows (pkg/store, pruneChunk): before
-- the first, logs_removed_from marks the deploy, so that one whose lines
-- are partly gone (a crash in the middle) reads as a deploy whose log
-- retention removed, never as whole. logs_pruned_at is set once the last
-- line is gone (retention.logs goes on with a deploy until then).
ALTER TABLE manent_deployments ADD COLUMN logs_removed_from TEXT;
