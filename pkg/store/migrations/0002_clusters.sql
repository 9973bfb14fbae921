-- What the agents report (SPEC §9). Each snapshot replaces a cluster's rows
-- in one transaction; objects absent from it are deleted.
CREATE TABLE IF NOT EXISTS manent_clusters (
    name           TEXT PRIMARY KEY,
    -- when the server received the last snapshot, and when the agent read it
    last_report_at TEXT NOT NULL,
    reported_at    TEXT NOT NULL,
    pods           INTEGER NOT NULL DEFAULT 0,
    workloads      INTEGER NOT NULL DEFAULT 0
);

-- One row per pod; data is the pod as reported (JSON), hash its digest so
-- an unchanged pod is not rewritten.
CREATE TABLE IF NOT EXISTS manent_cluster_pods (
    cluster     TEXT NOT NULL REFERENCES manent_clusters(name) ON DELETE CASCADE,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    deploy_id   TEXT NOT NULL,
    application TEXT NOT NULL DEFAULT '',
    environment TEXT NOT NULL DEFAULT '',
    hash        TEXT NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (cluster, namespace, name)
);
CREATE INDEX IF NOT EXISTS manent_cluster_pods_deploy ON manent_cluster_pods (cluster, deploy_id);

-- One row per Deployment, StatefulSet or DaemonSet.
CREATE TABLE IF NOT EXISTS manent_cluster_workloads (
    cluster     TEXT NOT NULL REFERENCES manent_clusters(name) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    deploy_id   TEXT NOT NULL,
    application TEXT NOT NULL DEFAULT '',
    environment TEXT NOT NULL DEFAULT '',
    hash        TEXT NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (cluster, kind, namespace, name)
);
CREATE INDEX IF NOT EXISTS manent_cluster_workloads_deploy ON manent_cluster_workloads (cluster, deploy_id);
