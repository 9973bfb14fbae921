-- Superseded by idx_workflow_status_deadline_v2.

DROP INDEX IF EXISTS "idx_workflow_status_deadline";
