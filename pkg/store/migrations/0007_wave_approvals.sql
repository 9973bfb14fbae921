-- Approvals between rollout waves (a wave with approval: true).
CREATE TABLE IF NOT EXISTS manent_wave_approvals (
    deployment_id TEXT NOT NULL REFERENCES manent_deployments(id) ON DELETE CASCADE,
    wave          TEXT NOT NULL,
    identity      TEXT NOT NULL,
    verdict       TEXT NOT NULL,
    comment       TEXT NOT NULL DEFAULT '',
    time          TEXT NOT NULL,
    PRIMARY KEY (deployment_id, wave, identity)
);
