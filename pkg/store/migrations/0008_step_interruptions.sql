-- How often a step was the first one a resumed execution of its deploy's
-- workflow ran: its worker stopped in it (or just before it). A deploy gives
-- up after workers.max_recovery_attempts resumptions of one step.
ALTER TABLE manent_steps ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
