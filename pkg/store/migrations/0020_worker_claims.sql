-- A takeover of a dead or leaving worker (SPEC §11.3) claims its row before
-- DBOS recovers its deploys, and records the takeover after: no transaction
-- stays open while recovery runs (store.TakeOver). claim is the claiming
-- call's token, claimed_by the worker running the recovery, claimed_ms when
-- it claimed (epoch milliseconds, the database's clock). A claim ends
-- (stale: another worker may claim again) at claim_until_ms, or as soon as
-- its claimer is no longer alive, or restarted after claiming.
ALTER TABLE manent_workers ADD COLUMN claim TEXT;
ALTER TABLE manent_workers ADD COLUMN claimed_by TEXT;
ALTER TABLE manent_workers ADD COLUMN claimed_ms BIGINT;
ALTER TABLE manent_workers ADD COLUMN claim_until_ms BIGINT;
