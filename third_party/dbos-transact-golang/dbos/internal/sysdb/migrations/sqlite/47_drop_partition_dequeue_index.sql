DROP INDEX IF EXISTS "idx_workflow_status_partition_dequeue";
