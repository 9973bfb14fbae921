ALTER TABLE operation_outputs ADD COLUMN started_at_epoch_ms INTEGER;
ALTER TABLE operation_outputs ADD COLUMN completed_at_epoch_ms INTEGER;
