//! The partial inbox (`partial_inbox`): halves of a job on several nodes that ingest holds
//! until their other half comes (the digest's `ingest::partials` decides what to hold, merge
//! and store; these are its statements).

use crate::{Result, WriteTx};
use rusqlite::params;

/// A held or kept half as `partial_inbox` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldHalf {
    pub end_ms: u64,
    pub key: String,
    /// The record, deflated.
    pub deflated: Vec<u8>,
    /// It is to be looked at by the escalation rules.
    pub look: bool,
}

impl HeldHalf {
    /// From a row of `end_ms, key, record, look`.
    fn of(row: &crate::db::Row<'_>) -> Result<HeldHalf> {
        Ok(HeldHalf {
            end_ms: row.get(0)?,
            key: row.get(1)?,
            deflated: row.get(2)?,
            look: row.get(3)?,
        })
    }
}

/// The state of a row of the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfState {
    Held,
    Merged,
    Stored,
    Late,
}

impl HalfState {
    fn name(self) -> &'static str {
        match self {
            HalfState::Held => "held",
            HalfState::Merged => "merged",
            HalfState::Stored => "stored",
            HalfState::Late => "late",
        }
    }
}

/// [`WriteTx::partials_of`]'s statement (by the index `partial_inbox_held`, in its order).
const OTHER_HALF: &str = "SELECT end_ms, key, record, look FROM partial_inbox
     WHERE state = ?5 AND uid = ?1 AND half = ?2 AND end_ms BETWEEN ?3 AND ?4
     ORDER BY end_ms, key";

/// [`WriteTx::take_lone_halves`]'s statement: the held rows only (by the index
/// `partial_inbox_held`: the other states are kept for good, and only grow).
const LONE: &str =
    "UPDATE partial_inbox SET state = 'stored' WHERE state = 'held' AND held_ms <= ?1
     RETURNING end_ms, key, record, look";

impl WriteTx<'_> {
    /// Hold `half` (`half`: `abort` or `stopped`, of uid `uid`) as held at `now_ms`, unless a
    /// row of its end and key is there already (read before, or another record under them):
    /// returns whether it was held.
    pub fn hold_half(&self, half: &HeldHalf, name: &str, uid: u32, now_ms: u64) -> Result<bool> {
        let held = self.db.execute(
            "INSERT INTO partial_inbox (end_ms, key, half, uid, look, record, state, held_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'held', ?7) ON CONFLICT DO NOTHING",
            params![
                half.end_ms,
                half.key,
                name,
                uid,
                half.look,
                half.deflated,
                now_ms
            ],
        )?;
        Ok(held == 1)
    }

    /// The record (deflated) of the inbox's row of `end_ms` and `key`.
    pub fn held_record(&self, end_ms: u64, key: &str) -> Result<Vec<u8>> {
        self.db.query_one(
            "SELECT record FROM partial_inbox WHERE end_ms = ?1 AND key = ?2",
            params![end_ms, key],
            |row| row.get(0),
        )
    }

    /// Mark the row (`end_ms`, `key`) of the inbox as in `state`.
    pub fn mark_half(&self, end_ms: u64, key: &str, state: HalfState) -> Result<()> {
        self.db.execute(
            "UPDATE partial_inbox SET state = ?3 WHERE end_ms = ?1 AND key = ?2",
            params![end_ms, key, state.name()],
        )?;
        Ok(())
    }

    /// The rows in `state` of uid `uid`'s halves named `name` that ended in `[from, to]`, in
    /// end and key order, until `each` says it found the one it looks for (`true`).
    pub fn find_half(
        &self,
        (uid, name): (u32, &str),
        (from, to): (u64, u64),
        state: HalfState,
        mut each: impl FnMut(HeldHalf) -> Result<bool>,
    ) -> Result<()> {
        self.db.each(
            OTHER_HALF,
            params![uid, name, from, to, state.name()],
            |row| each(HeldHalf::of(row)?),
        )
    }

    /// The held halves that were held at `held_to_ms` or before, marked stored (in no order).
    pub fn take_lone_halves(&self, held_to_ms: u64) -> Result<Vec<HeldHalf>> {
        self.db.query(LONE, &[&held_to_ms], HeldHalf::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WriteStore;

    /// The inbox is looked up by its index `partial_inbox_held`, never read whole (its merged,
    /// stored and late rows are kept for good), and a half's candidates come in the index's
    /// order.
    #[test]
    fn the_inbox_is_read_by_its_index() {
        let db = WriteStore::in_memory().unwrap();
        let lone = db.query_plan(LONE, &[&0]);
        assert!(
            lone.iter()
                .any(|step| step.contains("USING INDEX partial_inbox_held (state=?)")),
            "{lone:?}"
        );
        let other = db.query_plan(OTHER_HALF, &[&0, &"abort", &0, &0, &"stored"]);
        assert!(
            other.iter().any(|step| step.contains(
                "USING INDEX partial_inbox_held (state=? AND uid=? AND end_ms>? AND end_ms<?)"
            )) && !other.iter().any(|step| step.contains("TEMP B-TREE")),
            "{other:?}"
        );
    }
}
