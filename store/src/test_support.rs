//! For tests only (feature `test-support`): databases as an older mpistat, a damaged disk or
//! another program left them, made and looked at with SQL that no mpistat command runs.

use crate::Result;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::path::Path;

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
