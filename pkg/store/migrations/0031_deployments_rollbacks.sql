-- The rollbacks (rollback_of set), few among the deploys: retention's
-- stillNeeded keeps each SUCCESS rollback and the deploy it went back from
-- until that version succeeds there again, and searches them here rather
-- than walking every SUCCESS deploy (manent_deployments_state) of the
-- history on each pass.
CREATE INDEX IF NOT EXISTS manent_deployments_rollbacks ON manent_deployments (state) WHERE rollback_of <> '';
