-- Each worker's policy-relevant configuration (governance, rbac, auth
-- subjects, plugins.steps, artifacts.sources, the allow-lists, the
-- workflow version): config_digest digests it whole, config_parts holds
-- the digest of each part as JSON ({"governance": "…", …}), so workers
-- configured otherwise are told apart and what differs is named
-- (docs/operations.md "One server or several workers"). NULL: a row of an
-- earlier version.
ALTER TABLE manent_workers ADD COLUMN config_digest TEXT;
ALTER TABLE manent_workers ADD COLUMN config_parts TEXT;
