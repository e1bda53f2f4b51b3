//! The schema: [`MIGRATIONS`], applied in order by the write handle ([`crate::WriteStore::migrate`]);
//! SQLite's `user_version` counts how many ran.

/// Schema versions, oldest first. Never edit a published entry: add a new one.
pub const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE jobs (
        key TEXT PRIMARY KEY,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX jobs_by_end ON jobs (end_ms);
    CREATE TABLE rejected (
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        source TEXT NOT NULL,
        detail TEXT NOT NULL,
        line TEXT,
        PRIMARY KEY (kind, ref)
    ) WITHOUT ROWID;
    CREATE TABLE positions (
        id INTEGER PRIMARY KEY,
        head_len INTEGER NOT NULL,
        head_crc INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        path TEXT NOT NULL,
        stat TEXT
    );
    CREATE TABLE mails (
        user TEXT NOT NULL,
        week TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('sent', 'failed')),
        attempts INTEGER NOT NULL,
        error TEXT,
        recipient TEXT NOT NULL,
        PRIMARY KEY (user, week)
    ) WITHOUT ROWID;
",
    "
    CREATE TABLE jobs_in_arrival_order (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record BLOB NOT NULL
    );
    INSERT INTO jobs_in_arrival_order (key, uid, user, job_id, exe, ranks, start_ms, end_ms,
            wall_ns_sum, mpi_ns_sum, partial, record)
        SELECT key, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum, mpi_ns_sum,
            partial, record
        FROM jobs ORDER BY end_ms, key;
    DROP TABLE jobs;
    ALTER TABLE jobs_in_arrival_order RENAME TO jobs;
    CREATE INDEX jobs_by_end ON jobs (end_ms);
",
    "
    -- Jobs the escalation rules have looked at (the jobs stored before this version count as
    -- looked at: upgrading must not escalate old jobs).
    CREATE TABLE considered (key TEXT PRIMARY KEY) WITHOUT ROWID;
    INSERT INTO considered SELECT key FROM jobs;
    -- The analysis of a traced job's trace (summary: JSON of analyze::Summary).
    CREATE TABLE analyses (
        key TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        end_ms INTEGER NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        dir TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        summary TEXT,
        error TEXT
    ) WITHOUT ROWID;
    CREATE INDEX analyses_by_user ON analyses (user, end_ms);
",
    "
    -- The rest of each job's index (mpistat_record::JobIndex), so that ingest files a job and
    -- the escalation rule looks at it without inflating the record, and whoever reads the
    -- record checks it is the one filed. NULL in the rows stored before (`model_version` NULL:
    -- their other columns were made from the decoded record).
    ALTER TABLE jobs ADD COLUMN model_version INTEGER;
    ALTER TABLE jobs ADD COLUMN host TEXT;
    ALTER TABLE jobs ADD COLUMN pid INTEGER;
    ALTER TABLE jobs ADD COLUMN wall_ns_max INTEGER;
    ALTER TABLE jobs ADD COLUMN critical_path_ns INTEGER;
    ALTER TABLE jobs ADD COLUMN work_sum_ns INTEGER;
    ALTER TABLE jobs ADD COLUMN traced TEXT;
    -- Jobs the escalation rules are to look at: ingest queues a job that is traced or meets the
    -- rule (judged on its index) with the job itself, and the look after the run takes it off.
    -- Replaces `considered`, which had to list every job: the jobs not in it are queued.
    -- `id` is the job's, `uid` and `exe` are its; `traced` 1 if it was traced, 0 if not, NULL
    -- if not known (stored before this version: its record tells).
    CREATE TABLE escalation_queue (
        id INTEGER PRIMARY KEY,
        uid INTEGER NOT NULL,
        exe TEXT NOT NULL,
        traced INTEGER
    );
    INSERT INTO escalation_queue (id, uid, exe, traced)
        SELECT id, uid, exe, NULL FROM jobs WHERE key NOT IN (SELECT key FROM considered);
    DROP TABLE considered;
",
    "
    -- A job is unique by (end time, key) instead of by key: keys are hashes, so every insert
    -- went to a random page of the key index, and every commit of a big ingest rewrote most of
    -- that index (the bulk of what ingest wrote besides the records). End times grow as records
    -- arrive, so the new index is appended to and also serves the digest's selection by end
    -- time, in place of jobs_by_end. A job's records all end at the same time; the key already
    -- stands for the job's id, host, pid and start. Row ids are kept (the escalation queue
    -- refers to them). SQLite cannot drop a column's UNIQUE: the table is made again.
    CREATE TABLE jobs_unique_by_end (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record BLOB NOT NULL,
        model_version INTEGER,
        host TEXT,
        pid INTEGER,
        wall_ns_max INTEGER,
        critical_path_ns INTEGER,
        work_sum_ns INTEGER,
        traced TEXT
    );
    INSERT INTO jobs_unique_by_end (id, key, uid, user, job_id, exe, ranks, start_ms, end_ms,
            wall_ns_sum, mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max,
            critical_path_ns, work_sum_ns, traced)
        SELECT id, key, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum,
            mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max,
            critical_path_ns, work_sum_ns, traced
        FROM jobs ORDER BY id;
    DROP TABLE jobs;
    ALTER TABLE jobs_unique_by_end RENAME TO jobs;
    CREATE UNIQUE INDEX jobs_by_end ON jobs (end_ms, key);
",
    "
    -- The application (record model 2: an interpreter's script or module; NULL in older rows
    -- and for records without one, whose application is `exe`), which the escalation queue and
    -- rule key on instead of the executable, and analyses name.
    ALTER TABLE jobs ADD COLUMN app TEXT;
    ALTER TABLE escalation_queue RENAME COLUMN exe TO app;
    ALTER TABLE analyses RENAME COLUMN exe TO app;
",
    "
    -- Analysis records (mpistat analyze --send, run by the job's user where the trace is) that
    -- ingest filed: their attested sender is the uid they claim. After the run each is matched
    -- to its job: stored in `analyses` if the job is traced and has that uid, else rejected as
    -- forged; one whose job never came is rejected as an orphan after a while. The digest never
    -- reads a trace itself any more. `key` is the analysis record's (one per job), with `uid`
    -- the row's key: another user's claim to the same job cannot keep the owner's out.
    -- `received_ms` is when ingest filed it; `looked_to` the last job row (`jobs.id`) its job
    -- was looked for in, so that one waiting for its job is looked for among new rows only.
    CREATE TABLE analysis_inbox (
        key TEXT NOT NULL,
        job_key TEXT NOT NULL,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        host TEXT NOT NULL,
        dir TEXT NOT NULL,
        summary TEXT,
        error TEXT,
        analysed_ms INTEGER NOT NULL,
        received_ms INTEGER NOT NULL,
        source TEXT NOT NULL,
        looked_to INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, uid)
    ) WITHOUT ROWID;
",
    "
    -- Rollups (crate::rollup): the admin pages' sums per UTC day (`day` = end_ms / 86400000),
    -- site-wide and per user, and the critical jobs, kept by ingest with the jobs. A database
    -- with jobs is marked `stale`: the first command that opens it with the site configuration
    -- builds them from the jobs (that needs the records, which SQL cannot read).
    CREATE TABLE rollup_days (day INTEGER PRIMARY KEY, data TEXT NOT NULL);
    CREATE TABLE rollup_users (
        day INTEGER NOT NULL,
        user TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns INTEGER NOT NULL,
        mpi_ns INTEGER NOT NULL,
        totals TEXT NOT NULL,
        detail TEXT NOT NULL,
        PRIMARY KEY (day, user)
    ) WITHOUT ROWID;
    CREATE INDEX rollup_users_by_user ON rollup_users (user, day);
    CREATE TABLE critical_jobs (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        user TEXT NOT NULL,
        wall_ns INTEGER NOT NULL,
        reasons TEXT NOT NULL,
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    CREATE TABLE rollup_state (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    INSERT INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
    -- A user's jobs of an interval, listed and sorted without reading their rows.
    CREATE INDEX jobs_by_user ON jobs (user, end_ms, key, wall_ns_sum, mpi_ns_sum, ranks);
    -- The search of the live pages: by job id, and by application.
    CREATE INDEX jobs_by_job_id ON jobs (job_id);
    CREATE INDEX jobs_by_app ON jobs (coalesce(app, exe), end_ms, key);
",
    "
    -- More rollups (crate::rollup): each user's totals per calendar month (`month`: the day
    -- number of its first day), which a month's users list and user pages add up instead of a
    -- row per day and user; the jobs per day and application, which the search by application
    -- reads instead of every job's application in `jobs_by_app`. Made from the records by the
    -- first command that opens a database with jobs (`stale`), like the first rollups.
    CREATE TABLE rollup_user_months (
        month INTEGER NOT NULL,
        user TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns INTEGER NOT NULL,
        mpi_ns INTEGER NOT NULL,
        totals TEXT NOT NULL,
        PRIMARY KEY (month, user)
    ) WITHOUT ROWID;
    CREATE TABLE rollup_apps (
        day INTEGER NOT NULL,
        app TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        PRIMARY KEY (day, app)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
",
    "
    -- Partial records of a job on several nodes that may be one half of two (the aborting
    -- rank's `MPI_Abort ... on rank R`, R > 0, and rank 0's `SIGTERM from the launcher`):
    -- ingest holds them here instead of storing them, stores the two halves of a job as one job
    -- when both are here, and a half still alone after the site's grace period as it is
    -- (crate::ingest::partials). Rows stay (`state` merged or stored) so that reading a record
    -- again stores nothing. `half` is 'abort' or 'stopped'; `record` the deflated record.
    CREATE TABLE partial_inbox (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        half TEXT NOT NULL CHECK (half IN ('abort', 'stopped')),
        uid INTEGER NOT NULL,
        look INTEGER NOT NULL,
        record BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('held', 'merged', 'stored')),
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    CREATE INDEX partial_inbox_held ON partial_inbox (state, uid, end_ms);
",
    "
    -- The critical list by CPU time, read in that order: its first page was a sort of every
    -- critical job of the interval (1.7 s a request at 10M jobs a month). The order's ties are
    -- broken by key as before; the primary key's end_ms completes the entry.
    CREATE INDEX critical_jobs_by_cpu ON critical_jobs (wall_ns DESC, key);
",
    "
    -- A held partial record waits for its other half from when ingest held it (`held_ms`, by
    -- the ingest run's clock), no longer from its job's end: an ingest running late (a syslog
    -- backlog, a stopped daemon, an old file) stored every half alone at the end of the run
    -- that held it, though its twin came in the next. Rows held before wait from their end, as
    -- they did. A half whose twin was stored alone before it came is kept as `late`: not stored
    -- (the twin counts the job), not lost (crate::ingest::partials). SQLite cannot change a
    -- CHECK: the table is made again.
    CREATE TABLE partial_inbox_held_ms (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        half TEXT NOT NULL CHECK (half IN ('abort', 'stopped')),
        uid INTEGER NOT NULL,
        look INTEGER NOT NULL,
        record BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('held', 'merged', 'stored', 'late')),
        held_ms INTEGER NOT NULL,
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    INSERT INTO partial_inbox_held_ms (end_ms, key, half, uid, look, record, state, held_ms)
        SELECT end_ms, key, half, uid, look, record, state, end_ms FROM partial_inbox;
    DROP TABLE partial_inbox;
    ALTER TABLE partial_inbox_held_ms RENAME TO partial_inbox;
    CREATE INDEX partial_inbox_held ON partial_inbox (state, uid, end_ms);
",
    "
    -- A job's key is the key of its syslog lines and its uid, `<wire key>-<uid>`
    -- (mpistat_record::model::stored_key): the wire key is a hash of what the sender claims (job
    -- id, host, pid, start), which another user could copy, taking or sharing the job's key, its
    -- page and its analysis. Rows, analyses, critical jobs and held partial records are keyed
    -- anew (the analyses and critical jobs by their job's row, found by end and key); the
    -- rollups, which name jobs by key inside their JSON, are made again from the jobs by the
    -- first command that opens the database (`stale`). `origin` is where a job's lines came
    -- from: the host rsyslog named, after ` via ` the relay that delivered them (NULL: stored
    -- before, or no host in the line).
    ALTER TABLE jobs ADD COLUMN origin TEXT;
    UPDATE analyses SET key = key || '-' || (SELECT jobs.uid FROM jobs
            WHERE jobs.end_ms = analyses.end_ms AND jobs.key = analyses.key)
        WHERE EXISTS (SELECT 1 FROM jobs
            WHERE jobs.end_ms = analyses.end_ms AND jobs.key = analyses.key);
    UPDATE critical_jobs SET key = key || '-' || (SELECT jobs.uid FROM jobs
            WHERE jobs.end_ms = critical_jobs.end_ms AND jobs.key = critical_jobs.key)
        WHERE EXISTS (SELECT 1 FROM jobs
            WHERE jobs.end_ms = critical_jobs.end_ms AND jobs.key = critical_jobs.key);
    UPDATE partial_inbox SET key = key || '-' || uid;
    UPDATE jobs SET key = key || '-' || uid;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
",
    "
    -- What `mpistat serve`'s /metrics adds up over the last hour, day and week (crate::metrics),
    -- per UTC hour (`hour` = end_ms / 3600000) so that a window is at most 168 rows: rollups
    -- (crate::rollup) kept by ingest with the jobs and made again by rebuild-rollups, as the
    -- others are (a database with jobs is marked `stale` and rebuilt when first opened). Site
    -- sums per hour, and per hour the applications, Slurm accounts and partitions
    -- (`dimension`), whose biggest by MPI time the metrics name.
    CREATE TABLE rollup_hours (
        hour INTEGER PRIMARY KEY,
        jobs INTEGER NOT NULL,
        wall_ns REAL NOT NULL,
        mpi_ns REAL NOT NULL,
        imbalance_jobs INTEGER NOT NULL,
        imbalance_weighted REAL NOT NULL,
        imbalance_wall_ns REAL NOT NULL,
        escalated_traces INTEGER NOT NULL
    );
    CREATE TABLE rollup_hour_groups (
        dimension TEXT NOT NULL,
        hour INTEGER NOT NULL,
        name TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns REAL NOT NULL,
        mpi_ns REAL NOT NULL,
        PRIMARY KEY (dimension, hour, name)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
    -- Jobs that met the escalation rule, per hour of their end, as ingest judged them when it
    -- stored them (with the rule then in force, as the escalation did; not rebuilt).
    CREATE TABLE escalation_rule_hours (hour INTEGER PRIMARY KEY, jobs INTEGER NOT NULL);
    -- When each rejected entry was made (NULL: before this version), and how many were made
    -- per hour and kind, kept by triggers whoever inserts or withdraws one (an incomplete job
    -- whose parts came later), so that /metrics never counts the whole table.
    ALTER TABLE rejected ADD COLUMN rejected_ms INTEGER;
    CREATE TABLE rejected_hours (
        hour INTEGER NOT NULL,
        kind TEXT NOT NULL,
        entries INTEGER NOT NULL,
        PRIMARY KEY (hour, kind)
    ) WITHOUT ROWID;
    CREATE TRIGGER rejected_counted AFTER INSERT ON rejected BEGIN
        UPDATE rejected SET rejected_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER)
            WHERE kind = NEW.kind AND ref = NEW.ref;
        INSERT INTO rejected_hours (hour, kind, entries)
            VALUES (CAST(unixepoch('subsec') * 1000 AS INTEGER) / 3600000, NEW.kind, 1)
            ON CONFLICT (hour, kind) DO UPDATE SET entries = entries + 1;
    END;
    CREATE TRIGGER rejected_withdrawn AFTER DELETE ON rejected
        WHEN OLD.rejected_ms IS NOT NULL BEGIN
        UPDATE rejected_hours SET entries = entries - 1
            WHERE hour = OLD.rejected_ms / 3600000 AND kind = OLD.kind;
    END;
    -- The analyses of an interval's jobs (escalated traces analysed).
    CREATE INDEX analyses_by_end ON analyses (end_ms);
    -- The time of the newest syslog line ingest has read (rsyslog's, of a line it trusts), for
    -- the ingest lag; kept as the largest one seen.
    CREATE TABLE ingest_clock (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        newest_line_ms INTEGER NOT NULL
    );
",
    // Read positions per log host: the host whose file each position is (several ingests, one
    // per log host, into one database each resume their own files, even files whose first bytes
    // are alike, which shared one row). A position without one is from before, taken over by
    // the first host that saves it. A table of its own, so that `positions` keeps its columns;
    // IF NOT EXISTS: a database rewound by hand to an older schema (as tests do) may have it.
    "
    CREATE TABLE IF NOT EXISTS position_hosts (id INTEGER PRIMARY KEY, host TEXT NOT NULL);
",
    "
    -- Each user's totals per ISO week (`week`: the day number of its Monday), which a week's
    -- overview and users list add up instead of a row per day and user (70,000 rows, 30 MB of
    -- JSON for a week of 10,000 users): as the months, kept by ingest and rebuilt from the
    -- records by the first command that opens a database with jobs (`stale`).
    CREATE TABLE rollup_user_weeks (
        week INTEGER NOT NULL,
        user TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns INTEGER NOT NULL,
        mpi_ns INTEGER NOT NULL,
        totals TEXT NOT NULL,
        PRIMARY KEY (week, user)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
",
    // Task `pages` (issue 35 §3): a job by its key alone (a link without `?end=`, as the static
    // site names its pages), without scanning every job's entry in `jobs_by_end` (1.7 s cold at
    // 1M jobs). Keys are hashes: an index by key would take a random page per insert (what
    // MIGRATIONS[4] removed); led by the key's first hex digit, new entries are appended at 16
    // places, and a lookup reads a sixteenth of it.
    "
    CREATE INDEX jobs_by_key_digit ON jobs (substr(key, 1, 1), end_ms, key);
",
    // Task `critcount` (issue 35 §3): how many critical jobs ended in each UTC hour, kept with
    // `critical_jobs` by the same writes, so that a period's count adds up its hours (a month's
    // count read every critical job: 0.9 s at 4.8 M jobs on PostgreSQL). Filled here from the
    // rows there. A rebuild under way is started again (its tables had none of these counts).
    "
    CREATE TABLE rollup_hour_criticals (hour INTEGER PRIMARY KEY, jobs INTEGER NOT NULL);
    INSERT INTO rollup_hour_criticals (hour, jobs)
        SELECT end_ms / 3600000, count(*) FROM critical_jobs GROUP BY end_ms / 3600000;
    DELETE FROM rollup_state WHERE name IN ('rebuild_to', 'rebuild_critical');
",
    // Task `pages10m` (issue 35 §3): a user's jobs in each order the user page offers besides
    // end time (ReadStore::jobs_of_user), read in that order and stopped at the page's last
    // row, instead of every entry of the period in `jobs_by_user` sorted (user7's 400,000 jobs
    // of a month at 10 M: 1-2 s cold). Covering, so that no row is read.
    "
    CREATE INDEX jobs_of_user_by_cpu ON jobs (user, wall_ns_sum DESC, end_ms, key);
    CREATE INDEX jobs_of_user_by_mpi_share
        ON jobs (user, CAST(mpi_ns_sum AS REAL) / max(wall_ns_sum, 1) DESC, end_ms, key);
    CREATE INDEX jobs_of_user_by_ranks ON jobs (user, ranks DESC, end_ms, key);
",
];
