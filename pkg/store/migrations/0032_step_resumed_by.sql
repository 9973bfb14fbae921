-- The execution that last counted a resumption of the step (its worker and
-- DBOS attempt, "w1#3"): StepResumed counts one execution once, also when
-- the worker sends it again after a lost connection hid its commit.
ALTER TABLE manent_steps ADD COLUMN resumed_by TEXT NOT NULL DEFAULT '';
