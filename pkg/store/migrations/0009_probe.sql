-- /readyz writes here to prove the database can be written (not only read).
CREATE TABLE IF NOT EXISTS manent_probe (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL
);
