-- A step between two attempts: its last attempt failed with a retryable
-- error and another will run. The step stays RUNNING (it has no result
-- yet) with the failed attempt's error, when the next attempt is due and
-- how many attempts it may have (docs/descriptor.md, max_retries). NULL and 0:
-- not between attempts, or a row of an earlier version.
ALTER TABLE manent_steps ADD COLUMN next_attempt_at TEXT;
ALTER TABLE manent_steps ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
