//! The escalation list: which (user, application) pairs the profiler traces automatically.
//!
//! `mpistat ingest` writes it (by the site's rules, see [`crate::EscalationConfig`], or on an
//! admin's `mpistat escalate add`) and the profiler reads it at `MPI_Init`. One entry per line,
//! tab-separated: uid, application (the job record's `app`: the executable's path, or an
//! interpreter's script or module, e.g. `/home/alice/run.py`), captures left, expiry (Unix seconds), reason; `#` starts
//! a comment. Writers replace the file atomically (temporary file + rename), so a job never reads
//! a half-written list. The profiler reads it with [`load`]: a regular file only, and at most
//! [`READ_MAX_BYTES`] of it, since every rank of every job on the site reads it.

use crate::files::{self, FileError};
use std::path::Path;

/// Most bytes the list may have: writers never write more (`mpistat ingest` leaves out what
/// would not fit, see `ingest/src/escalate.rs`), and every rank of every job reads it at
/// `MPI_Init`, so it stays small (an entry is typically 100 bytes: 2,500 of them fit), and
/// within what the profiler reads of it ([`READ_MAX_BYTES`]).
pub const LIST_MAX_BYTES: usize = 256 * 1024;
const _: () = assert!(
    LIST_MAX_BYTES as u64 <= READ_MAX_BYTES,
    "the profiler reads it all"
);

/// One (user, application) to trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub uid: u32,
    /// The application (the record's `app`; named `exe` since lists written before
    /// applications had executables here, which are still the applications of native programs).
    pub exe: String,
    /// Traced runs still to come; the entry is spent at 0.
    pub captures_left: u32,
    /// Unix time (seconds) after which the entry no longer applies.
    pub expires_unix: u64,
    /// Why it is on the list (the rule that matched, or "admin").
    pub reason: String,
}

impl Entry {
    /// Whether a job of `uid` running application `app` at `now_unix` is to be traced.
    pub fn applies(&self, uid: u32, app: &str, now_unix: u64) -> bool {
        self.uid == uid && self.exe == app && self.captures_left > 0 && now_unix < self.expires_unix
    }
}

const HEADER: &str = "# mpistat escalation list (written by mpistat; edit with `mpistat escalate`)\n# uid\tapplication\tcaptures left\texpires (unix s)\treason\n";

/// Parses a list: the entries plus a problem for each line that is not one.
pub fn parse(text: &str) -> (Vec<Entry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        match parse_line(line) {
            None => {}
            Some(Some(e)) => entries.push(e),
            Some(None) => problems.push(format!(
                "line {}: not `uid<TAB>exe<TAB>captures<TAB>expiry<TAB>reason`: {line:?}",
                index + 1
            )),
        }
    }
    (entries, problems)
}

/// One line of a list: `None` for a blank line or a comment, else the entry, if it is one.
pub fn parse_line(line: &str) -> Option<Option<Entry>> {
    if line.trim().is_empty() || line.starts_with('#') {
        return None;
    }
    let mut fields = line.split('\t');
    let mut field = || fields.next();
    let entry = (|| {
        let entry = Entry {
            uid: field()?.parse().ok()?,
            exe: field()?.to_string(),
            captures_left: field()?.parse().ok()?,
            expires_unix: field()?.parse().ok()?,
            reason: field()?.to_string(),
        };
        (field().is_none() && !entry.exe.is_empty()).then_some(entry)
    })();
    Some(entry)
}

/// The most of the list [`load`] reads: some 10,000 entries. Every rank of every job reads the
/// list at `MPI_Init`, so a list grown by mistake (or by a hostile record before ingest bounded
/// applications: 5 MB made a rank's peak 93 MB instead of 12) costs each at most this much.
pub const READ_MAX_BYTES: u64 = 1 << 20;

/// The text of the list at `path`, read as [`files::read_regular`] reads (a regular file, not
/// blocking, through no other user's symlink), at most [`READ_MAX_BYTES`] of it; and, for a
/// longer list, a note saying where it was cut (the entries after are not seen: the line the
/// cap cuts is dropped whole). Go through its lines with [`parse_line`]: the profiler keeps no
/// entry but the one that applies (5 MB of short entries, parsed into a list, took 80 MB).
pub fn load(path: &Path) -> Result<(String, Option<String>), FileError> {
    let mut capped = files::read_regular(path, READ_MAX_BYTES)?;
    let note = (!capped.whole).then(|| {
        let whole_lines = capped
            .bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        capped.bytes.truncate(whole_lines);
        format!(
            "{}: longer than {READ_MAX_BYTES} bytes; only the entries in its first \
             {whole_lines} bytes apply",
            path.display()
        )
    });
    let text = String::from_utf8(capped.bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok((text, note))
}

/// The file's text for `entries`.
pub fn encode(entries: &[Entry]) -> String {
    let mut out = String::from(HEADER);
    for e in entries {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            e.uid,
            clean(&e.exe),
            e.captures_left,
            e.expires_unix,
            clean(&e.reason)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn entries_round_trip(
            uid in any::<u32>(),
            exe in "/[a-z/]{1,30}",
            captures_left in any::<u32>(),
            expires_unix in any::<u64>(),
            reason in "[a-zA-Z0-9 %>.]{0,40}",
        ) {
            let entries = vec![Entry { uid, exe, captures_left, expires_unix, reason }];
            prop_assert_eq!(parse(&encode(&entries)), (entries, Vec::new()));
        }

        #[test]
        fn garbage_is_a_problem_not_a_panic(text in "\\PC{0,200}") {
            let (entries, problems) = parse(&text);
            prop_assert!(entries.len() + problems.len() <= text.lines().count());
        }
    }

    #[test]
    fn a_list_longer_than_the_cap_is_read_up_to_its_last_whole_line() {
        let dir = std::env::temp_dir().join(format!("mpistat-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let entry = |exe: &str| Entry {
            uid: 7,
            exe: exe.into(),
            captures_left: 1,
            expires_unix: 9,
            reason: "admin".into(),
        };
        let first = entry("/a");
        let long = entry(&format!("/{}", "x".repeat(READ_MAX_BYTES as usize)));
        let path = dir.join("list");
        std::fs::write(&path, encode(&[first.clone(), long, entry("/b")])).unwrap();
        let (text, note) = load(&path).unwrap();
        assert_eq!(parse(&text), (vec![first.clone()], Vec::new()));
        assert!(note.unwrap().contains("longer than 1048576 bytes"));
        std::fs::write(&path, encode(std::slice::from_ref(&first))).unwrap();
        let (text, note) = load(&path).unwrap();
        assert_eq!((parse(&text).0, note), (vec![first], None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn applies_only_to_its_user_and_executable_while_captures_and_time_last() {
        let e = Entry {
            uid: 1000,
            exe: "/home/a/solver".into(),
            captures_left: 1,
            expires_unix: 2_000,
            reason: "admin".into(),
        };
        assert!(e.applies(1000, "/home/a/solver", 1_999));
        assert!(!e.applies(1001, "/home/a/solver", 1_999));
        assert!(!e.applies(1000, "/home/a/other", 1_999));
        assert!(!e.applies(1000, "/home/a/solver", 2_000));
        let spent = Entry {
            captures_left: 0,
            ..e
        };
        assert!(!spent.applies(1000, "/home/a/solver", 1_999));
    }
}
