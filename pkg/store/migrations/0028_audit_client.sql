-- The client of an audited request: its address (the one the per-address
-- limits count, trusted_proxies and X-Forwarded-For read) and its
-- User-Agent, each bounded. '' for an entry no request made (a schedule's
-- tick) and for every entry written before: an entry's chain hash covers
-- them only when one is set, so the rows written before still verify.
ALTER TABLE manent_audit ADD COLUMN client_addr TEXT NOT NULL DEFAULT '';
ALTER TABLE manent_audit ADD COLUMN user_agent TEXT NOT NULL DEFAULT '';
