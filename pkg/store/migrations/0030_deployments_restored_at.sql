-- When a failed deploy (ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED, or CANCELLED)
-- was restored: the finished_at of the next SUCCESS of its
-- application/environment, written on the failure when that SUCCESS
-- finishes. DORA's time to restore reads it from the failure itself, so
-- retention.deploys removing the success (a rollback, say) later neither
-- leaves the failure looking unrestored nor moves its restore to a later
-- success. NULL: not restored yet. Filled here for the failures already
-- recorded, from the successes still kept.
ALTER TABLE manent_deployments ADD COLUMN restored_at TEXT;
UPDATE manent_deployments SET restored_at = (
    SELECT MIN(s.finished_at) FROM manent_deployments s
    WHERE s.application = manent_deployments.application AND s.environment = manent_deployments.environment
      AND s.state = 'SUCCESS' AND s.finished_at >= manent_deployments.finished_at)
WHERE state IN ('ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CANCELLED') AND finished_at IS NOT NULL;
-- The failures a SUCCESS restores are found without reading the
-- environment's whole history.
CREATE INDEX IF NOT EXISTS manent_deployments_unrestored ON manent_deployments (application, environment)
    WHERE restored_at IS NULL AND state IN ('ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CANCELLED');
