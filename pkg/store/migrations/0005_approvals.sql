-- Approvals and rejections of deploys waiting in AWAITING_APPROVAL.
CREATE TABLE IF NOT EXISTS manent_approvals (
    deployment_id TEXT NOT NULL REFERENCES manent_deployments(id) ON DELETE CASCADE,
    identity      TEXT NOT NULL,
    verdict       TEXT NOT NULL,
    comment       TEXT NOT NULL DEFAULT '',
    plan_digest   TEXT NOT NULL,
    time          TEXT NOT NULL,
    PRIMARY KEY (deployment_id, identity)
);
