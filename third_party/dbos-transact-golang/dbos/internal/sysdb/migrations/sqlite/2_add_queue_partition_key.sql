ALTER TABLE workflow_status ADD COLUMN queue_partition_key TEXT;
