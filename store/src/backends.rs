//! The handles' API on both backends: each test runs the same calls on a SQLite file and on a
//! PostgreSQL server of its own ([`TestDatabase::both`]) and finds the same answers, SQLite's
//! being the reference (the older backend, which the rest of mpistat's tests check).

use crate::partials::{HalfState, HeldHalf};
use crate::rollups::{GroupRow, HourRow, Span, Tables, UserRow};
use crate::test_support::TestDatabase;
use crate::{
    CriticalEntry, Inserted, JobOrder, JobRow, Location, Position, Quarantined, ReadStore,
    Received, Rejected, WriteStore,
};
use mpistat_record::wire::DecodedJob;
use mpistat_record::{AnalysisRecord, JobRecord};

const HOUR_MS: u64 = crate::rollups::HOUR_MS;
const BASE_MS: u64 = 1_700_000_000_000;

/// A job of user `user` (uid `uid`), its `n`-th, that ended `n` minutes after [`BASE_MS`].
fn job(user: &str, uid: u32, n: u64) -> (JobRecord, JobRow) {
    let end = BASE_MS + n * 60_000;
    let record = JobRecord {
        version: 1,
        job_id: format!("{}", 1000 + n),
        uid,
        user: user.into(),
        exe: format!("/home/{user}/solver{}", n % 2),
        host: "node1".into(),
        pid: 4000 + n as u32,
        ranks: 4 + n as u32,
        nodes: 1,
        start_unix_ms: end - 1000 * (n + 1),
        end_unix_ms: end,
        trace: (n == 0).then(|| mpistat_record::model::TraceInfo {
            reason: "escalation".into(),
            ..Default::default()
        }),
        ..JobRecord::default()
    };
    let deflated = crate::deflated_record(&record);
    let mut row = JobRow::decoded(DecodedJob {
        record: record.clone(),
        deflated,
    });
    row.look = n.is_multiple_of(2);
    row.meets_rule = n.is_multiple_of(3);
    (record, row)
}

/// Run `scenario` on each backend and check it says the same on both: what it said on SQLite.
fn on_both(name: &str, scenario: impl Fn(&Location) -> Vec<String>) -> Vec<String> {
    let [sqlite, postgres] = TestDatabase::both(name);
    let reference = scenario(&sqlite.location());
    let said = scenario(&postgres.location());
    for (n, (a, b)) in reference.iter().zip(&said).enumerate() {
        assert_eq!(a, b, "step {n} of {name}: SQLite, then PostgreSQL");
    }
    assert_eq!(reference.len(), said.len(), "{name}: steps");
    reference
}

/// Ingest's writes (jobs again and colliding, rejected entries, positions, the newest line,
/// analyses) and every read of the jobs, analyses, mails and metrics.
#[test]
fn ingest_and_its_readers_on_both_backends() {
    let said = on_both("ingest", |location| {
        let mut said = Vec::new();
        let mut say = |what: &str, value: String| said.push(format!("{what}: {value}"));
        let mut db = WriteStore::open_at(location).unwrap();
        let jobs: Vec<_> = (0..6)
            .map(|n| {
                job(
                    if n < 4 { "alice" } else { "bob" },
                    1000 + (n >= 4) as u32,
                    n,
                )
            })
            .collect();
        let tx = db.transaction().unwrap();
        for (_, row) in &jobs[..2] {
            assert!(matches!(tx.insert_job(row).unwrap(), Inserted::New));
        }
        // The rest in one statement on PostgreSQL, with one stored before and one twice (last:
        // each conflict takes a row id there).
        let batch: Vec<JobRow> = [2, 3, 4, 5, 1, 3]
            .iter()
            .map(|&n| jobs[n].1.clone())
            .collect();
        say("batch", format!("{:?}", tx.insert_jobs(&batch).unwrap()));
        assert!(matches!(
            tx.insert_job(&jobs[1].1).unwrap(),
            Inserted::Again
        ));
        let mut other = jobs[2].1.clone();
        other.deflated = crate::deflated_record(&JobRecord {
            ranks: 99,
            ..jobs[2].0.clone()
        });
        say("collision", format!("{:?}", tx.insert_job(&other).unwrap()));
        for (kind, reference) in [("incomplete", "k1"), ("incomplete", "k2"), ("forged", "f")] {
            let rejected = Rejected {
                kind,
                reference: reference.into(),
                source: "/var/log/a".into(),
                detail: "why".into(),
                line: Some("line".into()),
            };
            tx.insert_rejected(&rejected).unwrap();
            tx.insert_rejected(&rejected).unwrap();
        }
        tx.clear_incomplete("k2").unwrap();
        let mut position = Position {
            id: 0,
            head_len: 10,
            head_crc: 0xdead_beef,
            offset: 100,
            stat: None,
        };
        position.id = tx.save_position(&position, "/var/log/a").unwrap();
        let second = tx.save_position(&position.clone(), "/var/log/a.1").unwrap();
        say("position ids", format!("{} {second}", position.id));
        position.offset = 250;
        position.stat = Some("1:2:3:4".into());
        tx.save_position(&position, "/var/log/a.1").unwrap();
        tx.note_newest_line(BASE_MS + 5).unwrap();
        tx.note_newest_line(BASE_MS + 3).unwrap();
        let analysis = |n: usize, uid: u32| Received {
            key: format!("a{n}"),
            analysis: AnalysisRecord {
                version: mpistat_record::analysis::ANALYSIS_MODEL_VERSION,
                job_key: jobs[n].0.wire_key(),
                uid,
                user: jobs[n].0.user.clone(),
                host: "node1".into(),
                dir: format!("/tmp/trace{n}"),
                summary: (n == 0).then(|| "{}".into()),
                error: None,
                analysed_unix_ms: BASE_MS + 7,
            },
            received_ms: BASE_MS + n as u64,
            source: "/var/log/a".into(),
            looked_to: 0,
        };
        tx.insert_analysis(&analysis(0, 1000)).unwrap();
        tx.insert_analysis(&analysis(0, 1000)).unwrap();
        tx.insert_analysis(&analysis(3, 1001)).unwrap();
        tx.commit().unwrap();

        say("jobs", format!("{}", db.job_count().unwrap()));
        say("positions", format!("{:?}", db.positions().unwrap()));
        say(
            "position paths",
            format!("{:?}", db.position_paths().unwrap()),
        );
        say("rejected", format!("{:?}", db.rejected().unwrap()));
        say("incomplete", format!("{:?}", db.incomplete_keys().unwrap()));
        say("newest line", format!("{:?}", db.newest_line_ms().unwrap()));
        let all = db.jobs_ended_between(0, u64::MAX >> 1).unwrap();
        assert_eq!(all, jobs.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
        let some = db
            .jobs_ended_between(BASE_MS + 60_000, BASE_MS + 180_000)
            .unwrap();
        say(
            "jobs ended",
            format!("{:?}", some.iter().map(|r| &r.job_id).collect::<Vec<_>>()),
        );
        assert_eq!(db.job(&jobs[4].1.key).unwrap().as_ref(), Some(&jobs[4].0));
        assert_eq!(db.job("none").unwrap(), None);
        let (end, key) = (jobs[5].0.end_unix_ms, jobs[5].1.key.clone());
        assert_eq!(
            db.job_ended_at(end, &key).unwrap().as_ref(),
            Some(&jobs[5].0)
        );
        say(
            "with id",
            format!("{:?}", db.jobs_with_id("1003", 5).unwrap()),
        );
        let app = jobs[1].1.index.application().to_owned();
        say(
            "of app",
            format!(
                "{:?}",
                db.jobs_of_application(&app, 0, u64::MAX >> 1, 2).unwrap()
            ),
        );
        for order in [
            JobOrder::End,
            JobOrder::Cpu,
            JobOrder::MpiShare,
            JobOrder::Ranks,
        ] {
            let page = db
                .jobs_of_user("alice", (0, u64::MAX >> 1), order, 3, 1)
                .unwrap();
            say(&format!("alice by {order:?}"), format!("{page:?}"));
        }
        let queued = db.queued_jobs().unwrap();
        say("queued", format!("{queued:?}"));
        let ids: Vec<i64> = queued.iter().map(|q| q.id).collect();
        let mut of_rows = Vec::new();
        db.each_filed_job_of_rows(&ids, |filed, record| {
            of_rows.push((filed.id, record.job_id))
        })
        .unwrap();
        say("of rows", format!("{of_rows:?}"));
        say(
            "filed",
            format!("{:?}", db.filed_job(ids[0]).unwrap().map(|f| f.key)),
        );
        db.unqueue(ids[..1].iter().copied()).unwrap();
        say(
            "queued after",
            format!("{}", db.queued_jobs().unwrap().len()),
        );

        let inbox = db.analysis_inbox().unwrap();
        say("inbox", format!("{inbox:?}"));
        let found = db.job_of_analysis(&inbox[0]).unwrap().map(|f| f.key);
        say("job of analysis", format!("{found:?}"));
        db.store_analysis(&jobs[0].1.index, &inbox[0].analysis)
            .unwrap();
        db.store_analysis(&jobs[0].1.index, &inbox[0].analysis)
            .unwrap();
        db.reject_analysis(&inbox[1], "forged", "not the sender's")
            .unwrap();
        say("inbox after", format!("{:?}", db.analysis_inbox().unwrap()));
        say("analyses", format!("{:?}", db.analyses_by_key().unwrap()));
        say(
            "alice's analyses",
            format!(
                "{:?}",
                db.analyses_between("alice", 0, u64::MAX >> 1).unwrap()
            ),
        );
        say(
            "traced",
            format!("{:?}", db.traced_between(0, u64::MAX >> 1, 5).unwrap()),
        );

        db.record_mail("alice", "2023-W46", "alice@x", Err("refused"))
            .unwrap();
        db.record_mail("alice", "2023-W46", "alice@x", Err("again"))
            .unwrap();
        db.record_mail("bob", "2023-W46", "bob@x", Ok(())).unwrap();
        say(
            "alice's mail",
            format!("{:?}", db.mail_status("alice", "2023-W46").unwrap()),
        );
        say(
            "bob's mail",
            format!("{:?}", db.mail_status("bob", "2023-W46").unwrap()),
        );
        say(
            "failed weeks",
            format!("{:?}", db.failed_mail_weeks().unwrap()),
        );

        let hours = (BASE_MS / HOUR_MS, BASE_MS / HOUR_MS + 2);
        // In no particular order: sorted.
        let mut metrics = db
            .in_snapshot(|db| -> crate::Result<_> {
                Ok((
                    db.rule_jobs_per_hour(hours.0, hours.1)?,
                    db.escalated_analyses_per_hour(hours.0, hours.1)?,
                    db.rejected_per_hour(0, u64::MAX / HOUR_MS)?
                        .into_iter()
                        .map(|(_, kind, n)| (kind, n))
                        .collect::<Vec<_>>(),
                ))
            })
            .unwrap();
        metrics.0.sort();
        metrics.1.sort();
        metrics.2.sort();
        say("metrics", format!("{metrics:?}"));
        said
    });
    // What SQLite said is what the rest of mpistat's tests rely on: a few of its answers.
    let said = said.join("\n");
    for expected in [
        "jobs: 6",
        "incomplete: {\"k1\"}",
        "newest line: Some(1700000000005)",
        "queued after: 2",
        "alice's mail: Some(Failed { attempts: 2, error: \"again\" })",
        "failed weeks: [\"2023-W46\"]",
        "collision: Collision(",
        "metrics: ([(472222, 2)], [(472222, true, 1)], [(\"forged\", 2), (\"incomplete\", 1)])",
    ] {
        assert!(said.contains(expected), "{expected} in\n{said}");
    }
}

/// The rollups: written, added to, read, rebuilt and swapped in (twice: the second swap finds
/// the first's tables and indexes).
#[test]
fn rollups_on_both_backends() {
    let said = on_both("rollups", |location| {
        let mut said = Vec::new();
        let mut say = |what: &str, value: String| said.push(format!("{what}: {value}"));
        let mut db = WriteStore::open_at(location).unwrap();
        for round in 0..3u64 {
            let tables = if round == 0 {
                Tables::Live
            } else {
                Tables::Rebuilt
            };
            let tx = db.transaction().unwrap();
            if round > 0 {
                tx.create_rebuilt_rollups().unwrap();
            }
            for day in [19_000, 19_001] {
                tx.put_rollup_day(tables, day, &format!("{{\"day\":{day},\"round\":{round}}}"))
                    .unwrap();
                for (user, jobs) in [("alice", 3 + round), ("bob", 1)] {
                    let row = UserRow {
                        jobs,
                        // Past i64::MAX: a heavy user's month at a large centre.
                        wall_ns: u64::MAX / 4 * 3,
                        mpi_ns: 7,
                        totals: "{\"t\":1}",
                        detail: "{\"d\":2}",
                    };
                    tx.put_rollup_user_day(tables, day, user, &row).unwrap();
                    tx.put_rollup_user_day(tables, day, user, &row).unwrap();
                    tx.put_rollup_user_span(tables, Span::Month, 18_990, user, &row)
                        .unwrap();
                    tx.put_rollup_user_span(tables, Span::Week, 18_995, user, &row)
                        .unwrap();
                }
                tx.add_applications(tables, &[(day, "Solver", 2)]).unwrap();
                tx.add_applications(tables, &[(day, "Solver", 3), (day, "other", 1)])
                    .unwrap();
            }
            let hour = HourRow {
                jobs: 2,
                wall_ns: 1.5e18,
                mpi_ns: 0.5,
                imbalance_jobs: 1,
                imbalance_weighted: 0.25,
                imbalance_wall_ns: 3.0,
                escalated_traces: 1,
            };
            tx.add_rollup_hours(tables, &[(470_000, hour)]).unwrap();
            tx.add_rollup_hours(tables, &[(470_000, hour), (470_001, hour)])
                .unwrap();
            let group = GroupRow {
                jobs: 1,
                wall_ns: 2.0,
                mpi_ns: 1.0,
            };
            tx.add_rollup_hour_groups(tables, &[("app", 470_000, "Solver", group)])
                .unwrap();
            let groups = [
                ("app", 470_000, "Solver", group),
                ("account", 470_000, "Solver", group),
            ];
            tx.add_rollup_hour_groups(tables, &groups).unwrap();
            // Many rows at once (one statement each on PostgreSQL): new, stored before, and the
            // day's detail.
            let row = |jobs: u64, detail: &'static str| UserRow {
                jobs,
                wall_ns: u64::MAX / 2,
                mpi_ns: 5 + round,
                totals: "{\"t\":2}",
                detail,
            };
            for span in [Span::Day, Span::Week] {
                let first = if span == Span::Day { 19_001 } else { 18_995 };
                let rows = [
                    (first, "bob", row(4 + round, "{\"d\":5}")),
                    (first, "carol", row(1, "{}")),
                    (first + 7, "carol", row(2, "{}")),
                ];
                tx.put_rollup_user_rows(tables, span, &rows).unwrap();
                let keys = [
                    (first, "bob"),
                    (first, "carol"),
                    (first, "dave"),
                    (first + 7, "alice"),
                ];
                let mut read: Vec<_> = tx
                    .rollup_user_rows(tables, span, &keys)
                    .unwrap()
                    .into_iter()
                    .collect();
                read.sort();
                say(&format!("{span:?} rows"), format!("{read:?}"));
            }
            let many: Vec<CriticalEntry> = [(5, 1), (6, 2), (5, 3)]
                .iter()
                .map(|&(n, wall_ns)| CriticalEntry {
                    end_ms: BASE_MS + n,
                    key: format!("k{n}"),
                    user: "carol".into(),
                    wall_ns: wall_ns + round,
                    reasons: "many".into(),
                })
                .collect();
            tx.put_criticals(tables, &many).unwrap();
            tx.put_criticals(tables, &many[..1]).unwrap();
            for n in 0..3 {
                let entry = CriticalEntry {
                    end_ms: BASE_MS + n,
                    key: format!("k{n}"),
                    user: "alice".into(),
                    wall_ns: 10 * (n % 2) + round,
                    reasons: "r".into(),
                };
                tx.put_critical(tables, &entry).unwrap();
                tx.put_critical(tables, &entry).unwrap();
            }
            tx.set_rollup_state("rebuild_to", "5").unwrap();
            say(
                "state",
                format!("{:?}", tx.rollup_state("rebuild_to").unwrap()),
            );
            say(
                "day",
                format!("{:?}", tx.rollup_day(tables, 19_000).unwrap()),
            );
            say(
                "user day",
                format!("{:?}", tx.rollup_user_day(tables, 19_001, "bob").unwrap()),
            );
            say(
                "user month",
                format!(
                    "{:?}",
                    tx.rollup_user_span(tables, Span::Month, 18_990, "alice")
                        .unwrap()
                ),
            );
            if round > 0 {
                tx.swap_in_rebuilt(&format!("critical {round}")).unwrap();
            }
            tx.commit().unwrap();
            db.drop_retired_rollups().unwrap();
            db.note_rollup_critical("ignored once noted").unwrap();

            let mut days = Vec::new();
            db.each_day_rollup((0, 20_000), |data| {
                days.push(data.to_owned());
                Ok(())
            })
            .unwrap();
            say("days", format!("{days:?}"));
            let mut totals = Vec::new();
            db.each_user_day_totals((0, 20_000), |user, json| {
                totals.push(format!("{user} {json}"));
                Ok(())
            })
            .unwrap();
            for span in [Span::Week, Span::Month] {
                db.each_user_span_totals(span, (0, 20_000), |user, json| {
                    totals.push(format!("{span:?} {user} {json}"));
                    Ok(())
                })
                .unwrap();
            }
            db.each_user_day_rollup("alice", (0, 20_000), |totals_json, detail| {
                totals.push(format!("alice {totals_json} {detail}"));
                Ok(())
            })
            .unwrap();
            totals.sort();
            say("totals", format!("{totals:?}"));
            say(
                "spans",
                format!(
                    "{:?}",
                    db.totals_of_spans(&[
                        (Span::Day, (19_000, 19_001)),
                        (Span::Month, (18_990, 18_991)),
                        (Span::Week, (18_995, 18_996)),
                        (Span::Day, (19_001, 19_002))
                    ])
                    .unwrap()
                ),
            );
            say("in rollups", format!("{}", db.jobs_in_rollups().unwrap()));
            say(
                "applications",
                format!(
                    "{:?}",
                    db.applications_containing((0, 20_000), "solv", 5).unwrap()
                ),
            );
            say(
                "hours",
                format!("{:?}", db.hours_between(0, 500_000).unwrap()),
            );
            let mut groups = Vec::new();
            db.each_hour_group("app", (0, 500_000), |hour, name, sums| {
                groups.push(format!("{hour} {name} {sums:?}"))
            })
            .unwrap();
            say("groups", format!("{groups:?}"));
            let critical = (BASE_MS, BASE_MS + 10);
            say(
                "critical count",
                format!("{}", db.critical_count(critical.0, critical.1).unwrap()),
            );
            for order in [JobOrder::End, JobOrder::Cpu] {
                let page = db.critical_page(critical, order, 3, (2, 1)).unwrap();
                say(&format!("critical by {order:?}"), format!("{page:?}"));
            }
            say(
                "critical state",
                format!("{:?}", db.rollup_state("critical").unwrap()),
            );
            say(
                "stale state",
                format!("{:?}", db.rollup_state("rebuild_to").unwrap()),
            );
        }
        said
    });
    let said = said.join("\n");
    for expected in [
        "critical state: Some(\"critical 2\")",
        "stale state: None",
        "applications: [(\"Solver\", 10)]",
    ] {
        assert!(said.contains(expected), "{expected} in\n{said}");
    }
}

/// The partial inbox: halves held once, found, marked, and the lone ones taken.
#[test]
fn the_partial_inbox_on_both_backends() {
    on_both("partials", |location| {
        let mut said = Vec::new();
        let mut db = WriteStore::open_at(location).unwrap();
        let tx = db.transaction().unwrap();
        for n in 0..4u64 {
            let half = HeldHalf {
                end_ms: BASE_MS + n,
                key: format!("k{n}"),
                deflated: vec![n as u8, 0, 255],
                look: n.is_multiple_of(2),
            };
            let name = if n < 2 { "abort" } else { "stopped" };
            said.push(format!(
                "held {n}: {}",
                tx.hold_half(&half, name, 1000, 10 + n).unwrap()
            ));
            said.push(format!(
                "again {n}: {}",
                tx.hold_half(&half, name, 1000, 10).unwrap()
            ));
        }
        said.push(format!(
            "record: {:?}",
            tx.held_record(BASE_MS + 1, "k1").unwrap()
        ));
        tx.mark_half(BASE_MS + 1, "k1", HalfState::Merged).unwrap();
        let mut seen = Vec::new();
        tx.find_half(
            (1000, "abort"),
            (BASE_MS, BASE_MS + 9),
            HalfState::Held,
            |half| {
                seen.push(half);
                Ok(true)
            },
        )
        .unwrap();
        said.push(format!("found: {seen:?}"));
        let mut lone = tx.take_lone_halves(12).unwrap();
        lone.sort_by_key(|half| half.end_ms);
        said.push(format!("lone: {lone:?}"));
        tx.commit().unwrap();
        said
    });
}

/// The read handle changes nothing on either backend: an unusable record is skipped and said,
/// the database refuses its writes, and a database of another schema is refused; the write
/// handle moves the record to the rejected entries.
#[test]
fn only_the_write_handle_quarantines_on_both_backends() {
    on_both("quarantine", |location| {
        let mut writer = WriteStore::open_at(location).unwrap();
        let (good, good_row) = job("alice", 1000, 1);
        let (_, bad_row) = job("alice", 1000, 2);
        let tx = writer.transaction().unwrap();
        for row in [&good_row, &bad_row] {
            tx.insert_job(row).unwrap();
        }
        tx.commit().unwrap();
        let garbage = match location {
            Location::Sqlite(_) => "x'00ff'",
            Location::Postgres(_) => "'\\x00ff'::BYTEA",
        };
        writer
            .execute_batch(&format!(
                "UPDATE jobs SET record = {garbage} WHERE key = '{}'",
                bad_row.key
            ))
            .unwrap();
        drop(writer);

        let reader = ReadStore::open_at(location).unwrap();
        assert_eq!(reader.job(&good_row.key).unwrap(), Some(good));
        assert_eq!(reader.job(&bad_row.key).unwrap(), None);
        let skipped = reader.take_quarantined();
        assert!(
            matches!(&skipped[..], [Quarantined::Left { detail }]
                if detail.contains("the stored record is not readable")),
            "{skipped:?}"
        );
        assert_eq!(
            reader.jobs_ended_between(0, u64::MAX >> 1).unwrap().len(),
            1
        );
        assert_eq!(reader.job_count().unwrap(), 2, "nothing moved");
        assert!(reader.db.batch("DELETE FROM jobs").is_err());
        drop(reader);

        let writer = WriteStore::open_at(location).unwrap();
        assert_eq!(writer.quarantine_unusable().unwrap(), 1);
        let moved = writer.take_quarantined();
        assert!(
            matches!(&moved[..], [Quarantined::Moved { .. }]),
            "{moved:?}"
        );
        let said = vec![
            format!("jobs: {}", writer.job_count().unwrap()),
            format!("rejected: {:?}", writer.rejected().unwrap()),
        ];
        // The schema of an older mpistat: the reader refuses it.
        let older = match location {
            Location::Sqlite(_) => "PRAGMA user_version = 1",
            Location::Postgres(_) => "UPDATE schema_version SET version = 1",
        };
        writer.execute_batch(older).unwrap();
        drop(writer);
        let refused = ReadStore::open_at(location).err();
        assert!(
            matches!(refused, Some(crate::Error::NotMigrated { found: 1, .. })),
            "{refused:?}"
        );
        said
    });
}

/// Read positions are kept per log host: two ingests (one per log host) into one database whose
/// files begin alike each resume their own file; a row from before hosts were kept is taken
/// over by the first host that saves it.
#[test]
fn read_positions_are_each_hosts_own_on_both_backends() {
    let said = on_both("positions", |location| {
        let mut said = Vec::new();
        let mut say = |what: &str, db: &WriteStore| {
            let positions = db.positions().unwrap();
            said.push(format!("{what}: {positions:?}"));
        };
        let head = |offset| Position {
            id: 0,
            head_len: 64,
            head_crc: 7,
            offset,
            stat: None,
        };
        let mut first = WriteStore::open_at(location).unwrap();
        first.set_position_host("log1");
        let mut second = WriteStore::open_at(location).unwrap();
        second.set_position_host("log2");
        // A row as an mpistat that kept no host left it.
        first
            .execute_batch(
                r#"INSERT INTO positions (head_len, head_crc, "offset", path, stat)
                   VALUES (8, 9, 10, '/var/log/old', NULL)"#,
            )
            .unwrap();
        say("first, before", &first);
        let tx = first.transaction().unwrap();
        let mut mine = head(100);
        mine.id = tx.save_position(&mine, "/var/log/mpistat.log").unwrap();
        tx.commit().unwrap();
        say("second, before it saves", &second);
        let old = second
            .positions()
            .unwrap()
            .into_iter()
            .find(|p| p.head_len == 8)
            .unwrap();
        let tx = second.transaction().unwrap();
        let theirs = head(7);
        let id = tx.save_position(&theirs, "/var/log/mpistat.log").unwrap();
        assert_ne!(id, mine.id, "another row for another host's file");
        tx.save_position(&Position { offset: 20, ..old }, "/var/log/old")
            .unwrap();
        tx.commit().unwrap();
        say("first, after", &first);
        say("second, after", &second);
        said
    });
    let row = |id, head_len, head_crc, offset| {
        format!("Position {{ id: {id}, head_len: {head_len}, head_crc: {head_crc}, offset: {offset}, stat: None }}")
    };
    assert_eq!(
        said,
        [
            format!("first, before: [{}]", row(1, 8, 9, 10)),
            format!("second, before it saves: [{}]", row(1, 8, 9, 10)),
            format!("first, after: [{}]", row(2, 64, 7, 100)),
            format!(
                "second, after: [{}, {}]",
                row(1, 8, 9, 20),
                row(3, 64, 7, 7)
            ),
        ]
    );
}

/// A long-lived reader (`serve`'s workers) whose PostgreSQL session the server closed (a
/// restart, an administrator) connects again when refreshed before its next request.
#[test]
fn a_postgresql_reader_connects_again_when_refreshed() {
    let server = crate::test_support::PostgresForTest::start();
    let location = server.location();
    let writer = WriteStore::open_at(&location).unwrap();
    let mut reader = ReadStore::open_at(&location).unwrap();
    assert_eq!(reader.job_count().unwrap(), 0);
    writer
        .execute_batch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
        )
        .unwrap();
    // Terminating signals the session: wait until it has ended.
    let others = "SELECT count(*) FROM pg_stat_activity
                  WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'";
    while writer
        .db
        .query_one(others, &[], |row| row.get::<i64>(0))
        .unwrap()
        > 0
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(reader.job_count().is_err(), "the session is gone");
    reader.refresh().unwrap();
    assert_eq!(reader.job_count().unwrap(), 0);
}

/// A read of many jobs hands them over in end order, the handle free for other reads meanwhile
/// (PostgreSQL's come from a cursor, a chunk at a time, not as one whole result).
#[test]
fn many_jobs_are_read_in_order_on_both_backends() {
    on_both("many", |location| {
        let mut db = WriteStore::open_at(location).unwrap();
        let jobs = 2_500;
        let tx = db.transaction().unwrap();
        for n in (0..jobs).rev() {
            tx.insert_job(&job("alice", 1000, n).1).unwrap();
        }
        tx.commit().unwrap();
        let mut ends = Vec::new();
        db.each_job_ended_between(0, u64::MAX >> 1, |record| {
            if ends.len() % 1000 == 999 {
                assert_eq!(db.job_count().unwrap(), jobs);
            }
            ends.push(record.end_unix_ms);
        })
        .unwrap();
        // The rows themselves (not the records, which the decoders may hand over after the last
        // row was read) come while the cursor is open.
        if let Location::Postgres(_) = location {
            let mut rows = 0;
            db.db
                .stream("SELECT end_ms FROM jobs ORDER BY end_ms", &[], |_| {
                    rows += 1;
                    if rows % 1000 == 0 {
                        let cursors = "SELECT count(*) FROM pg_cursors WHERE name LIKE 'mpistat%'";
                        let open = db.db.query_one(cursors, &[], |row| row.get::<i64>(0));
                        assert_eq!(open.unwrap(), 1, "read from a cursor");
                    }
                    Ok(false)
                })
                .unwrap();
            assert_eq!(rows, jobs);
        }
        assert_eq!(
            ends,
            (0..jobs).map(|n| BASE_MS + n * 60_000).collect::<Vec<_>>()
        );
        let reader = ReadStore::open_at(location).unwrap();
        let mut read = 0;
        reader
            .each_job_ended_between(BASE_MS, BASE_MS + 1_000 * 60_000, |_| read += 1)
            .unwrap();
        vec![format!("read: {read}")]
    });
}

/// Two writers (the ingests of two log hosts) that add to the same rollup row at once: the
/// second waits for the first's commit, as SQLite's write lock makes it, so neither's count is
/// lost. (On PostgreSQL the read-then-write of a month's totals lost counts: three ingests at
/// once left 922,222 of 1,000,000 jobs in the months' rows.)
#[test]
fn writers_at_once_lose_no_rollup_count() {
    on_both("writers", |location| {
        let add_one = |pause: std::time::Duration,
                       began: Option<std::sync::mpsc::SyncSender<()>>| {
            let mut db = WriteStore::open_at(location).unwrap();
            let tx = db.transaction().unwrap();
            if let Some(began) = began {
                began.send(()).unwrap();
            }
            let counted: u64 = tx
                .rollup_user_span(Tables::Live, Span::Month, 18_990, "alice")
                .unwrap()
                .map_or(0, |json| json.parse().unwrap());
            std::thread::sleep(pause);
            let totals = (counted + 1).to_string();
            let row = UserRow {
                jobs: counted + 1,
                wall_ns: 0,
                mpi_ns: 0,
                totals: &totals,
                detail: "",
            };
            tx.put_rollup_user_span(Tables::Live, Span::Month, 18_990, "alice", &row)
                .unwrap();
            tx.commit().unwrap();
        };
        let (began, first_began) = std::sync::mpsc::sync_channel(1);
        std::thread::scope(|threads| {
            threads.spawn(|| add_one(std::time::Duration::from_millis(500), Some(began)));
            first_began.recv().unwrap();
            threads.spawn(|| add_one(std::time::Duration::ZERO, None));
        });
        let mut counted = Vec::new();
        ReadStore::open_at(location)
            .unwrap()
            .each_user_span_totals(Span::Month, (0, 20_000), |_, json| {
                counted.push(json.to_string());
                Ok(())
            })
            .unwrap();
        assert_eq!(counted, ["2"], "{location}");
        counted
    });
}

/// Each hour's count of critical jobs (`rollup_hour_criticals`), as `critical_jobs` has them,
/// and a period's count ([`ReadStore::critical_count`], which adds up the hours) as a count of
/// the rows: over whole hours, hours with a part at each end, and within one hour.
fn critical_counts_of_the_rows(db: &ReadStore) -> String {
    let counted = |sql: &str| -> Vec<String> {
        db.db
            .query(sql, &[], |row| {
                Ok(format!("{} {}", row.get::<i64>(0)?, row.get::<i64>(1)?))
            })
            .unwrap()
    };
    let hours =
        counted("SELECT hour, jobs FROM rollup_hour_criticals WHERE jobs > 0 ORDER BY hour");
    assert_eq!(
        hours,
        counted(
            "SELECT end_ms / 3600000, count(*) FROM critical_jobs
             GROUP BY end_ms / 3600000 ORDER BY end_ms / 3600000"
        ),
        "each hour's count"
    );
    let first_hour = BASE_MS / HOUR_MS * HOUR_MS;
    let mut said = vec![format!("hours: {hours:?}")];
    for (from, to) in [
        (0, u64::MAX >> 2),
        (first_hour, first_hour + 3 * HOUR_MS),
        (first_hour + 1, first_hour + 2 * HOUR_MS + 1),
        (first_hour + HOUR_MS - 1, first_hour + HOUR_MS + 1),
        (BASE_MS + 1, BASE_MS + 3),
    ] {
        let rows: i64 = db
            .db
            .query_one(
                "SELECT count(*) FROM critical_jobs WHERE end_ms >= ?1 AND end_ms < ?2",
                rusqlite::params![from, to],
                |row| row.get(0),
            )
            .unwrap();
        let count = db.critical_count(from, to).unwrap();
        assert_eq!(count, rows as usize, "critical jobs in [{from}, {to})");
        said.push(format!("[{from}, {to}): {count}"));
    }
    said.join(", ")
}

/// The hourly counts of critical jobs are kept with the critical list by ingest's writes, a job
/// put again (a duplicate record), a quarantine and a rebuild (which swaps both in).
#[test]
fn the_hourly_critical_counts_follow_the_critical_list_on_both_backends() {
    on_both("critcount", |location| {
        let mut said = Vec::new();
        let mut db = WriteStore::open_at(location).unwrap();
        let first_hour = BASE_MS / HOUR_MS * HOUR_MS;
        // Jobs at both ends of an hour and across three.
        let ends = [
            BASE_MS + 1,
            BASE_MS + 2,
            first_hour + HOUR_MS - 1,
            first_hour + HOUR_MS,
            first_hour + 2 * HOUR_MS + 5,
        ];
        let entry = |end_ms: u64, wall_ns: u64| CriticalEntry {
            end_ms,
            key: format!("k{end_ms}"),
            user: "alice".into(),
            wall_ns,
            reasons: "r".into(),
        };
        let entries: Vec<_> = ends.iter().map(|&end| entry(end, 1)).collect();
        let (_, bad_row) = job("alice", 1000, 2);
        let tx = db.transaction().unwrap();
        tx.insert_job(&bad_row).unwrap();
        tx.put_criticals(Tables::Live, &entries[..3]).unwrap();
        tx.commit().unwrap();
        said.push(format!("ingest: {}", critical_counts_of_the_rows(&db)));

        let tx = db.transaction().unwrap();
        tx.put_criticals(Tables::Live, &entries[1..]).unwrap();
        tx.put_critical(Tables::Live, &entry(ends[0], 2)).unwrap();
        tx.commit().unwrap();
        said.push(format!("duplicates: {}", critical_counts_of_the_rows(&db)));

        let garbage = match location {
            Location::Sqlite(_) => "x'00ff'",
            Location::Postgres(_) => "'\\x00ff'::BYTEA",
        };
        db.execute_batch(&format!(
            "UPDATE jobs SET record = {garbage} WHERE key = '{}'",
            bad_row.key
        ))
        .unwrap();
        assert_eq!(db.quarantine_unusable().unwrap(), 0, "no usable record");
        let moved = db.take_quarantined();
        assert!(
            matches!(&moved[..], [Quarantined::Moved { .. }]),
            "{moved:?}"
        );
        said.push(format!("quarantine: {}", critical_counts_of_the_rows(&db)));

        let tx = db.transaction().unwrap();
        tx.create_rebuilt_rollups().unwrap();
        tx.put_criticals(Tables::Rebuilt, &entries[2..]).unwrap();
        tx.swap_in_rebuilt("thresholds").unwrap();
        tx.commit().unwrap();
        db.drop_retired_rollups().unwrap();
        said.push(format!("rebuild: {}", critical_counts_of_the_rows(&db)));
        said
    });
}
