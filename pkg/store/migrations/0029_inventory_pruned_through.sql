-- When retention.deploys last removed deploys of an application/environment:
-- the newest finished_at among those it removed. DORA says a window
-- reaching back before it is partial (it counts only the deploys retention
-- kept there). NULL: retention removed none, or a row an earlier version's
-- retention pruned (it writes nothing here).
ALTER TABLE manent_inventory ADD COLUMN pruned_through TEXT;
