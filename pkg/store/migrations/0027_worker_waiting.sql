-- The deploys a worker runs that hold none of its slots (workers.slots),
-- as of its last heartbeat: those waiting between rollout waves for an
-- approval, a freeze or an observation, or for a slot back. GET
-- /api/v1/workers counts them apart from those running. 0: none, or a row
-- an earlier version's worker beats (it writes nothing here).
ALTER TABLE manent_workers ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
