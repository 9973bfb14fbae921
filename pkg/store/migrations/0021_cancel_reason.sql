-- Why a deploy was flagged for cancel: the error it ends with when the flag
-- cancels it ("cancelled" for a user's cancel, "superseded by <id>" for a
-- schedule tick a later one replaced). Kept with the flag, so whoever ends
-- the deploy (the canceller, the workflow's next step, the sweeper) says
-- the same. NULL: no request, or one made before this column.
ALTER TABLE manent_deployments ADD COLUMN cancel_reason TEXT;
