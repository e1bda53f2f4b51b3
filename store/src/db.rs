//! The connection behind both handles: a SQLite file or a PostgreSQL session, with the few
//! calls the statements need (`execute`, `query`, transactions). A statement is written once,
//! in the SQL both speak, with SQLite's placeholders `?n` (sent to PostgreSQL as `$n`) and
//! identifiers PostgreSQL reserves quoted (`"user"`, `"offset"`). Where the dialects differ
//! beyond that, the caller gives each its own text ([`Dialect`]), named where it is used:
//! `greatest` for SQLite's two-argument `max`, `sum(..)::DOUBLE PRECISION` for `total`,
//! `strpos` for `instr`, no `INDEXED BY`, a JSON array's elements for `json_each`, the rollup
//! swap's catalogue.
//!
//! A PostgreSQL query's rows are read whole before they are handed on (so that the caller may use
//! the connection meanwhile), but for the reads of many rows ([`Db::stream`]: the records of an
//! interval), which come from a cursor a chunk at a time.
//!
//! Values cross as SQLite's ([`Value`]): parameters are anything rusqlite can bind, rows are
//! read with rusqlite's conversions ([`Row::get`]), so both backends read a column alike.

use crate::postgresql::message;
use crate::{Error, PostgresUrl, Result};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql as PgToSql, Type};
use rusqlite::types::{FromSql, ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Which SQL a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A PostgreSQL session and its prepared statements (by their SQLite text).
pub(crate) struct Postgres {
    pub(crate) url: PostgresUrl,
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    /// Inside a transaction begun by [`Db::begin`] (PostgreSQL cannot take a savepoint outside
    /// one, where SQLite begins one).
    in_transaction: Cell<bool>,
    /// Cursors open now ([`Db::stream`]): the next one's name.
    cursors: Cell<usize>,
}

/// Rows a PostgreSQL cursor hands over at a time ([`Db::stream`]).
const CURSOR_ROWS: usize = 1_000;

/// The connection of a handle.
pub(crate) enum Db {
    Sqlite(Connection),
    Postgres(Box<Postgres>),
}

/// How a transaction begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Reads and writes; SQLite takes the write lock when it first writes.
    Deferred,
    /// Holds SQLite's write lock from the start (waiting for it up to the busy timeout).
    Immediate,
    /// Reads only, all from one snapshot of the database.
    Snapshot,
}

/// A row of a query's result, from either backend.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// Column `i` as `T`, by rusqlite's conversions (a PostgreSQL value is first taken to the
    /// SQLite value it stands for).
    pub(crate) fn get<T: FromSql>(&self, i: usize) -> Result<T> {
        match self {
            Row::Sqlite(row) => Ok(row.get(i)?),
            Row::Postgres(row) => {
                let value = from_postgres(row, i)?;
                Ok(T::column_result(ValueRef::from(&value))?)
            }
        }
    }
}

/// Prepared statements a SQLite connection keeps (rusqlite's default is 16): every statement
/// goes through its cache, and ingest's batches alone cycle through more than 16 (jobs, rejected
/// entries, positions, the partial inbox, a dozen rollup writes), which would prepare them anew
/// each time.
const SQLITE_STATEMENTS_KEPT: usize = 64;

impl Db {
    pub(crate) fn sqlite(conn: Connection) -> Db {
        conn.set_prepared_statement_cache_capacity(SQLITE_STATEMENTS_KEPT);
        Db::Sqlite(conn)
    }

    pub(crate) fn postgres(url: PostgresUrl, client: postgres::Client) -> Db {
        Db::Postgres(Box::new(Postgres {
            url,
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
            in_transaction: Cell::new(false),
            cursors: Cell::new(0),
        }))
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The PostgreSQL session, for what only PostgreSQL has (statements of arrays).
    pub(crate) fn pg_session(&self) -> Result<&Postgres> {
        match self {
            Db::Postgres(pg) => Ok(pg),
            Db::Sqlite(_) => Err(Error::Sql(
                "a SQLite database, where a PostgreSQL one is needed".into(),
            )),
        }
    }

    /// The SQLite connection, for what only SQLite has (its pragmas, its catalogue, its file).
    pub(crate) fn sqlite_conn(&self) -> Result<&Connection> {
        match self {
            Db::Sqlite(conn) => Ok(conn),
            Db::Postgres(pg) => Err(Error::Sql(format!(
                "{}: a PostgreSQL database, where a SQLite file is needed",
                crate::Location::Postgres(pg.url.clone())
            ))),
        }
    }

    /// Run `sql` (statements, no parameters, no results).
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Db::Postgres(pg) => pg.client.borrow_mut().batch_execute(sql).map_err(pg_error),
        }
    }

    /// Run `sql` with `params`: how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64> {
        match self {
            Db::Sqlite(conn) => Ok(conn.prepare_cached(sql)?.execute(params)? as u64),
            Db::Postgres(pg) => pg.run(sql, params, |client, statement, params| {
                client.execute(statement, params)
            }),
        }
    }

    /// Every row `sql` selects with `params`, as `map` makes it.
    pub(crate) fn query<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut map: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut all = Vec::new();
        self.each(sql, params, |row| {
            all.push(map(row)?);
            Ok(false)
        })?;
        Ok(all)
    }

    /// Give `each` every row `sql` selects with `params`, in order, until it says to stop
    /// (`true`). SQLite's come as they are read; PostgreSQL's after the whole result came (so
    /// that `each` may use the connection).
    pub(crate) fn each(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut each: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(params)?;
                while let Some(row) = rows.next()? {
                    if each(&Row::Sqlite(row))? {
                        break;
                    }
                }
                Ok(())
            }
            Db::Postgres(pg) => {
                let rows = pg.run(sql, params, |client, statement, params| {
                    client.query(statement, params)
                })?;
                for row in &rows {
                    if each(&Row::Postgres(row))? {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// [`Db::each`] for a query of many rows (a week's records): PostgreSQL's come from a
    /// cursor, [`CURSOR_ROWS`] at a time, never the whole result in memory at once (in a
    /// transaction of its own unless one is open); SQLite's as [`Db::each`] gives them.
    pub(crate) fn stream(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut each: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        let Db::Postgres(pg) = self else {
            return self.each(sql, params, each);
        };
        let own = !self.in_transaction();
        if own {
            self.begin(Begin::Deferred)?;
        }
        // Named by depth: `each` may read with a cursor of its own meanwhile.
        let depth = pg.cursors.get();
        let cursor = format!("mpistat_rows_{depth}");
        pg.cursors.set(depth + 1);
        let fetch = format!("FETCH {CURSOR_ROWS} FROM {cursor}");
        let read = (|| -> Result<()> {
            pg.run(
                &format!("DECLARE {cursor} NO SCROLL CURSOR FOR {sql}"),
                params,
                |client, statement, params| client.execute(statement, params),
            )?;
            loop {
                // Prepared anew, never from the statement cache: a FETCH's rows are shaped by
                // the cursor's query, which another read under the same name may change.
                let rows = pg
                    .client
                    .borrow_mut()
                    .query(fetch.as_str(), &[])
                    .map_err(pg_error)?;
                for row in &rows {
                    if each(&Row::Postgres(row))? {
                        return Ok(());
                    }
                }
                if rows.len() < CURSOR_ROWS {
                    return Ok(());
                }
            }
        })();
        pg.cursors.set(depth);
        let ended = match (&read, own) {
            (Ok(()), true) => self.commit(),
            (Err(_), true) => self.rollback(),
            (Ok(()), false) => self.batch(&format!("CLOSE {cursor}")),
            // The caller's transaction goes on (unless the error aborted it): the cursor's
            // name is to be free for the next read.
            (Err(_), false) => {
                let _ = self.batch(&format!("CLOSE {cursor}"));
                Ok(())
            }
        };
        read?;
        ended
    }

    /// The first row `sql` selects, if any, as `map` makes it.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        map: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut map = Some(map);
        let mut found = None;
        self.each(sql, params, |row| {
            if let Some(map) = map.take() {
                found = Some(map(row)?);
            }
            Ok(true)
        })?;
        Ok(found)
    }

    /// The first row `sql` selects (an error if none), as `map` makes it.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        map: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, map)?
            .ok_or_else(|| Error::Sql(format!("no row: {sql}")))
    }

    /// Begin a transaction ([`Db::commit`] or [`Db::rollback`] end it).
    pub(crate) fn begin(&self, begin: Begin) -> Result<()> {
        let sql = match (self.dialect(), begin) {
            (Dialect::Sqlite, Begin::Immediate) => "BEGIN IMMEDIATE",
            (Dialect::Sqlite, _) => "BEGIN DEFERRED",
            (Dialect::Postgres, Begin::Snapshot) => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            // SQLite's write lock, held to the commit (the key is "mpiwrite" in ASCII): writers
            // read rollup rows and write them back added to, which two at once under READ
            // COMMITTED would each overwrite.
            (Dialect::Postgres, Begin::Immediate) => {
                "BEGIN; SELECT pg_advisory_xact_lock(7885918909267276901)"
            }
            (Dialect::Postgres, Begin::Deferred) => "BEGIN",
        };
        self.batch(sql)?;
        self.note_transaction(true);
        Ok(())
    }

    /// Commit; a commit that fails is rolled back (SQLite keeps the transaction open when its
    /// COMMIT fails, as rusqlite's transactions, which this replaces, did not).
    pub(crate) fn commit(&self) -> Result<()> {
        let done = self.batch("COMMIT");
        if done.is_err() {
            let _ = self.batch("ROLLBACK");
        }
        self.note_transaction(false);
        done
    }

    pub(crate) fn rollback(&self) -> Result<()> {
        let done = self.batch("ROLLBACK");
        self.note_transaction(false);
        done
    }

    fn note_transaction(&self, open: bool) {
        if let Db::Postgres(pg) = self {
            pg.in_transaction.set(open);
        }
    }

    fn in_transaction(&self) -> bool {
        match self {
            Db::Sqlite(conn) => !conn.is_autocommit(),
            Db::Postgres(pg) => pg.in_transaction.get(),
        }
    }

    /// Run `work` all or nothing: in a savepoint inside a transaction, else in one of its own.
    pub(crate) fn atomically<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        let nested = self.in_transaction();
        if nested {
            self.batch("SAVEPOINT atomically")?;
        } else {
            self.begin(Begin::Deferred)?;
        }
        let done = work();
        let end = match (&done, nested) {
            (Ok(_), true) => self.batch("RELEASE atomically"),
            (Ok(_), false) => self.commit(),
            (Err(_), true) => self.batch("ROLLBACK TO atomically; RELEASE atomically"),
            (Err(_), false) => self.rollback(),
        };
        let done = done?;
        end?;
        Ok(done)
    }
}

impl Postgres {
    /// The session no longer answers (the server closed it): checked by a round trip, as the
    /// client may not have seen the end yet when a statement failed for it.
    pub(crate) fn is_closed(&self) -> bool {
        self.client
            .borrow_mut()
            .is_valid(std::time::Duration::from_secs(10))
            .is_err()
    }

    /// `call` with the session, the prepared statement of `sql` and `params` as it takes them.
    fn run<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        call: impl FnOnce(
            &mut postgres::Client,
            &postgres::Statement,
            &[&(dyn PgToSql + Sync)],
        ) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let (statement, params) = self.bind(sql, params)?;
        let params: Vec<&(dyn PgToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        call(&mut self.client.borrow_mut(), &statement, &params).map_err(pg_error)
    }

    /// The rows of `sql` (SQLite's text, as everywhere) with parameters of PostgreSQL's own
    /// types: arrays, which a statement `unnest`s into rows, so that many rows go in one round
    /// trip where [`Db::execute`] takes one each.
    pub(crate) fn query_arrays(
        &self,
        sql: &str,
        params: &[&(dyn PgToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        let statement = self.statement(sql)?;
        self.client
            .borrow_mut()
            .query(&statement, params)
            .map_err(pg_error)
    }

    /// Rows into a table by `copy` (a `COPY ... FROM STDIN (FORMAT binary)` of columns of
    /// `types`), each written by `write`: no statement to plan, no array to take apart, the
    /// table's pages filled many rows at a time. Returns how many rows went in. A `write` that
    /// fails aborts the copy (and so the transaction).
    pub(crate) fn copy_in(
        &self,
        copy: &str,
        types: &[Type],
        write: impl FnOnce(&mut BinaryCopyInWriter<'_>) -> std::result::Result<(), postgres::Error>,
    ) -> Result<u64> {
        let mut client = self.client.borrow_mut();
        let mut writer = BinaryCopyInWriter::new(client.copy_in(copy).map_err(pg_error)?, types);
        write(&mut writer).map_err(pg_error)?;
        writer.finish().map_err(pg_error)
    }

    /// The prepared statement of `sql` (SQLite's text: placeholders become `$n`), prepared once.
    fn statement(&self, sql: &str) -> Result<postgres::Statement> {
        let cached = self.statements.borrow().get(sql).cloned();
        Ok(match cached {
            Some(statement) => statement,
            None => {
                let statement = self
                    .client
                    .borrow_mut()
                    .prepare(&postgres_text(sql))
                    .map_err(pg_error)?;
                self.statements
                    .borrow_mut()
                    .insert(sql.to_owned(), statement.clone());
                statement
            }
        })
    }

    /// The prepared statement of `sql` (SQLite's text: placeholders become `$n`) and `params`
    /// as the types it takes.
    fn bind(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
    ) -> Result<(postgres::Statement, Vec<Box<dyn PgToSql + Sync>>)> {
        let statement = self.statement(sql)?;
        let params = params
            .iter()
            .zip(statement.params())
            .enumerate()
            .map(|(i, (param, ty))| {
                to_postgres(&value_of(*param)?, ty, &format!("parameter {}", i + 1))
            })
            .collect::<Result<_>>()?;
        Ok((statement, params))
    }
}

/// `sql` with SQLite's numbered placeholders (`?1`) as PostgreSQL's (`$1`).
fn postgres_text(sql: &str) -> String {
    let mut text = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            text.push('$');
        } else {
            text.push(c);
        }
    }
    text
}

/// The value a rusqlite parameter binds.
fn value_of(param: &dyn ToSql) -> Result<Value> {
    Ok(match param.to_sql()? {
        ToSqlOutput::Borrowed(value) => value.into(),
        ToSqlOutput::Owned(value) => value,
        other => return Err(Error::Sql(format!("unexpected parameter {other:?}"))),
    })
}

pub(crate) fn pg_error(e: postgres::Error) -> Error {
    Error::Sql(message(&e))
}

/// `value` (of `what`: a column or a parameter) as a PostgreSQL value of type `ty`.
pub(crate) fn to_postgres(value: &Value, ty: &Type, what: &str) -> Result<Box<dyn PgToSql + Sync>> {
    let out_of_range = || Error::Data(format!("{what}: {value:?} is out of range for {ty}"));
    Ok(match (value, ty) {
        (Value::Null, &Type::INT8) => Box::new(None::<i64>),
        (Value::Null, &Type::INT4) => Box::new(None::<i32>),
        (Value::Null, &Type::FLOAT8) => Box::new(None::<f64>),
        (Value::Null, &Type::BOOL) => Box::new(None::<bool>),
        (Value::Null, &Type::BYTEA) => Box::new(None::<Vec<u8>>),
        (Value::Null, _) => Box::new(None::<String>),
        (Value::Integer(i), &Type::INT8) => Box::new(*i),
        (Value::Integer(i), &Type::INT4) => {
            Box::new(i32::try_from(*i).map_err(|_| out_of_range())?)
        }
        (Value::Integer(i), &Type::FLOAT8) => Box::new(*i as f64),
        (Value::Integer(i), &Type::BOOL) => Box::new(*i != 0),
        // SQLite keeps a whole REAL in an INTEGER column as an integer: so does this.
        (Value::Real(r), &Type::INT8) if r.fract() == 0.0 && r.abs() < 9.2e18 => {
            Box::new(*r as i64)
        }
        (Value::Real(r), &Type::FLOAT8) => Box::new(*r),
        (Value::Text(t), &Type::TEXT | &Type::VARCHAR) => Box::new(t.clone()),
        (Value::Blob(b), &Type::BYTEA) => Box::new(b.clone()),
        _ => {
            // E.g. a record of the first schema, stored as plain JSON text, which PostgreSQL's
            // BYTEA column could not tell from a compressed one.
            return Err(Error::Data(format!(
                "{what}: a {} value cannot go into PostgreSQL's {ty}",
                value.data_type()
            )));
        }
    })
}

/// Column `i` of a PostgreSQL row as the SQLite value it stands for.
pub(crate) fn from_postgres(row: &postgres::Row, i: usize) -> Result<Value> {
    let ty = row.columns()[i].type_();
    let value = match *ty {
        Type::INT8 => row
            .try_get::<_, Option<i64>>(i)
            .map(|v| v.map(Value::Integer)),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map(|v| v.map(|v| Value::Integer(v.into()))),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map(|v| v.map(|v| Value::Integer(v.into()))),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map(|v| v.map(Value::Real)),
        Type::TEXT => row
            .try_get::<_, Option<String>>(i)
            .map(|v| v.map(Value::Text)),
        Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(i)
            .map(|v| v.map(Value::Blob)),
        _ => {
            return Err(Error::Data(format!(
                "column {}: PostgreSQL type {ty} is none of mpistat's",
                row.columns()[i].name()
            )))
        }
    };
    Ok(value.map_err(pg_error)?.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::postgres_text;

    #[test]
    fn placeholders_become_postgresqls() {
        assert_eq!(
            postgres_text("SELECT a FROM t WHERE b = ?1 AND c = ?12 OR ? IS NULL"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 OR ? IS NULL"
        );
    }
}
