//! For tests only (feature `test-support`): databases as an older mpistat, a damaged disk or
//! another program left them, made and looked at with SQL that no mpistat command runs.

use crate::Result;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::postgresql::test_support::{columns as postgres_columns, execute_as_reader};

/// Every table of the SQLite database at `path` and its columns in order.
pub fn sqlite_columns(path: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let conn = Connection::open(path)?;
    let mut stmt = conn.prepare(
        "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
         WHERE m.type = 'table' ORDER BY m.name, c.cid",
    )?;
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))? {
        let (table, column) = row?;
        tables.entry(table).or_default().push(column);
    }
    Ok(tables)
}

/// Run `sql` (statements, no results) on the database at `path` (made if missing), whatever
/// its schema.
pub fn execute_batch(path: &Path, sql: &str) -> Result<()> {
    Connection::open(path)?.execute_batch(sql)?;
    Ok(())
}

/// The first column of every row `sql` selects from the database at `path`, whatever its
/// schema, as text ([`column_of`]).
pub fn column(path: &Path, sql: &str) -> Result<Vec<String>> {
    column_of(&Connection::open(path)?, sql)
}

/// The first column of every row `sql` selects, as text (NULL as an empty string, a BLOB as
/// its bytes read as UTF-8).
fn column_of(conn: &Connection, sql: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |row| {
        Ok(match row.get_ref(0)? {
            ValueRef::Null => String::new(),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Real(r) => r.to_string(),
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

impl crate::WriteStore {
    /// Run `sql` (statements, no results) on this database.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        Ok(self.conn.execute_batch(sql)?)
    }

    /// The first column of every row `sql` selects, as text ([`column_of`]).
    pub fn column(&self, sql: &str) -> Result<Vec<String>> {
        column_of(&self.conn, sql)
    }
}
