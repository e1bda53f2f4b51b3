//! `mpistat db copy FROM TO`: every row of one database into a new one, SQLite into PostgreSQL
//! or back, so that a site moves between the backends. Both have the same tables and columns
//! (`tests/tests/postgresql.rs` checks the schemas agree); rows are copied as they are, column
//! by column, in one transaction of the target: a copy that fails leaves it empty.

use crate::db::{from_postgres, to_postgres};
use crate::postgresql;
use crate::{Error, Location, ReadStore, Result, WriteStore};
use postgres::types::ToSql;
use postgres::Client;
use rusqlite::types::Value;

/// How many rows of each table a copy wrote (tables in name order).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Copied {
    pub tables: Vec<(String, u64)>,
}

/// The tables a copy moves and their columns, in order (every table of the schema but
/// PostgreSQL's `schema_version`: each side keeps its own).
type Tables = Vec<(String, Vec<String>)>;

/// Copy every row of the database at `from` (which must have this mpistat's schema) into the
/// database at `to`, made or brought up to date first and refused unless it holds no rows.
/// One end is SQLite, the other PostgreSQL.
pub fn copy(from: &Location, to: &Location) -> Result<Copied> {
    match (from, to) {
        (Location::Sqlite(from), Location::Postgres(to)) => {
            let source = ReadStore::open(from)?;
            postgresql::migrate(to)?;
            let mut target = postgresql::connect(to)?;
            let tables = sqlite_tables(source.db.sqlite_conn()?)?;
            into_postgres(&mut target, &tables, |table, columns, row| {
                let mut stmt = source.db.sqlite_conn()?.prepare(&select(table, columns))?;
                let mut rows = stmt.query([])?;
                while let Some(r) = rows.next()? {
                    let values = (0..columns.len())
                        .map(|i| r.get::<_, Value>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    row(values)?;
                }
                Ok(())
            })
        }
        (Location::Postgres(from), Location::Sqlite(to)) => {
            let mut source = postgresql::connect_to_read(from)?;
            let target = WriteStore::open(to)?;
            let tables = sqlite_tables(target.db.sqlite_conn()?)?;
            into_sqlite(&target, &tables, |table, columns, row| {
                for r in source.query(&select(table, columns), &[]).map_err(sql)? {
                    let values = (0..columns.len())
                        .map(|i| from_postgres(&r, i))
                        .collect::<Result<Vec<_>>>()?;
                    row(values)?;
                }
                Ok(())
            })
        }
        _ => Err(Error::Data(format!(
            "copying {from} to {to}: one is to be a SQLite file and the other a PostgreSQL URL"
        ))),
    }
}

/// Every table of a SQLite database with this mpistat's schema, and its columns.
fn sqlite_tables(conn: &rusqlite::Connection) -> Result<Tables> {
    let mut stmt = conn.prepare(
        "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, c.cid",
    )?;
    let mut tables: Tables = Vec::new();
    for row in stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))? {
        let (table, column): (String, String) = row?;
        match tables.last_mut() {
            Some((name, columns)) if *name == table => columns.push(column),
            _ => tables.push((table, vec![column])),
        }
    }
    Ok(tables)
}

/// `SELECT` of `columns` (quoted: `user` and `offset` are reserved in PostgreSQL).
fn select(table: &str, columns: &[String]) -> String {
    format!("SELECT {} FROM \"{table}\"", quoted(columns))
}

fn insert(table: &str, columns: &[String], placeholder: impl Fn(usize) -> String) -> String {
    let values: Vec<String> = (1..=columns.len()).map(placeholder).collect();
    format!(
        "INSERT INTO \"{table}\" ({}) VALUES ({})",
        quoted(columns),
        values.join(", ")
    )
}

fn quoted(columns: &[String]) -> String {
    let quoted: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
    quoted.join(", ")
}

fn sql(e: postgres::Error) -> Error {
    Error::Sql(postgresql::message(&e))
}

/// Write the rows `read` gives (`read(table, columns, row)` calls `row` with each row of the
/// table) into the PostgreSQL database of `client`, which must hold none.
fn into_postgres(
    client: &mut Client,
    tables: &Tables,
    mut read: impl FnMut(&str, &[String], &mut dyn FnMut(Vec<Value>) -> Result<()>) -> Result<()>,
) -> Result<Copied> {
    let mut tx = client.transaction().map_err(sql)?;
    refuse_rows(tables, |table| {
        let row = tx
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM \"{table}\")"), &[])
            .map_err(sql)?;
        Ok(row.get(0))
    })?;
    // The rejected entries keep the times they were made: the triggers that stamp new ones
    // and count them per hour (rejected_hours, copied as it is) stay out of the copy.
    tx.batch_execute("ALTER TABLE rejected DISABLE TRIGGER USER")
        .map_err(sql)?;
    let mut copied = Copied::default();
    for (table, columns) in tables {
        let statement = tx
            .prepare(&insert(table, columns, |i| format!("${i}")))
            .map_err(sql)?;
        let types = statement.params().to_vec();
        let mut rows = 0;
        read(table, columns, &mut |values| {
            let params = values
                .iter()
                .zip(&types)
                .zip(columns)
                .map(|((value, ty), column)| to_postgres(value, ty, &format!("{table}.{column}")))
                .collect::<Result<Vec<_>>>()?;
            let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
            tx.execute(&statement, &params).map_err(sql)?;
            rows += 1;
            Ok(())
        })?;
        copied.tables.push((table.clone(), rows));
    }
    tx.batch_execute(
        "ALTER TABLE rejected ENABLE TRIGGER USER;
         SELECT setval(pg_get_serial_sequence('jobs', 'id'), coalesce(max(id), 0) + 1, false)
             FROM jobs;
         SELECT setval(pg_get_serial_sequence('positions', 'id'), coalesce(max(id), 0) + 1,
             false) FROM positions;",
    )
    .map_err(sql)?;
    tx.commit().map_err(sql)?;
    Ok(copied)
}

/// Write the rows `read` gives into the SQLite database `target`, which must hold none.
fn into_sqlite(
    target: &WriteStore,
    tables: &Tables,
    mut read: impl FnMut(&str, &[String], &mut dyn FnMut(Vec<Value>) -> Result<()>) -> Result<()>,
) -> Result<Copied> {
    let tx = target.db.sqlite_conn()?.unchecked_transaction()?;
    refuse_rows(tables, |table| {
        Ok(tx.query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM \"{table}\")"),
            [],
            |row| row.get(0),
        )?)
    })?;
    // SQLite cannot switch a trigger off: the rejected entries' triggers (see into_postgres)
    // are dropped for the copy and made again, in its transaction.
    let triggers: Vec<(String, String)> = {
        let mut stmt = tx.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")?;
        let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (name, _) in &triggers {
        tx.execute_batch(&format!("DROP TRIGGER \"{name}\""))?;
    }
    let mut copied = Copied::default();
    for (table, columns) in tables {
        let mut statement = tx.prepare(&insert(table, columns, |i| format!("?{i}")))?;
        let mut rows = 0;
        read(table, columns, &mut |values| {
            statement.execute(rusqlite::params_from_iter(values))?;
            rows += 1;
            Ok(())
        })?;
        copied.tables.push((table.clone(), rows));
    }
    for (_, sql) in &triggers {
        tx.execute_batch(sql)?;
    }
    tx.commit()?;
    Ok(copied)
}

/// An error unless every table of `tables` is empty (`has_rows` says whether one has any).
fn refuse_rows(tables: &Tables, mut has_rows: impl FnMut(&str) -> Result<bool>) -> Result<()> {
    for (table, _) in tables {
        if has_rows(table)? {
            return Err(Error::Data(format!(
                "the target database already has rows (in {table}): a copy goes into a new one"
            )));
        }
    }
    Ok(())
}
