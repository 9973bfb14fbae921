-- Superseded by idx_workflow_status_in_flight_v2.

DROP INDEX IF EXISTS "idx_workflow_status_in_flight";
