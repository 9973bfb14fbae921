-- Duplicate of idx_workflow_topic, which covers the same columns in the same order.

DROP INDEX IF EXISTS "idx_notifications";
