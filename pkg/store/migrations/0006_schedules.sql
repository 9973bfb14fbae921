-- Recurring deploys (schedule.cron): each tick creates <schedule>@<UTC time>.
CREATE TABLE IF NOT EXISTS manent_schedules (
    id               TEXT PRIMARY KEY,
    application      TEXT NOT NULL,
    environment      TEXT NOT NULL,
    cron             TEXT NOT NULL,
    descriptor       TEXT NOT NULL,
    requester        TEXT NOT NULL,
    requester_groups TEXT NOT NULL DEFAULT '[]',
    created_at       TEXT NOT NULL,
    deleted_at       TEXT,
    last_tick        TEXT,
    last_deploy      TEXT NOT NULL DEFAULT '',
    last_error       TEXT NOT NULL DEFAULT ''
);
