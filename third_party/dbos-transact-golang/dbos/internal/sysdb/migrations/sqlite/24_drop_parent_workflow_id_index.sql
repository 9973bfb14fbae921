DROP INDEX IF EXISTS "idx_workflow_status_parent_workflow_id";
