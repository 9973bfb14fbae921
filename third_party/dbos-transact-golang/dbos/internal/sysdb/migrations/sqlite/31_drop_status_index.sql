DROP INDEX IF EXISTS "workflow_status_status_index";
