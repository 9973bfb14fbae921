-- Superseded by idx_operation_outputs_completed_at_function_name_v2.

DROP INDEX IF EXISTS "idx_operation_outputs_completed_at_function_name";
