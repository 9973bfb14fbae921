DROP INDEX IF EXISTS "idx_workflow_status_queue_status_started";
