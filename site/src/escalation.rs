//! The escalation list: which (user, application) pairs the profiler traces automatically.
//!
//! `mpistat ingest` writes it (by the site's rules, see [`crate::EscalationConfig`], or on an
//! admin's `mpistat escalate add`) and the profiler reads it at `MPI_Init`. One entry per line,
//! tab-separated: uid, application (the job record's `app`: the executable's path, or an
//! interpreter's script or module, e.g. `/home/alice/run.py`), captures left, expiry (Unix seconds), reason; `#` starts
//! a comment. Writers replace the file atomically (temporary file + rename), so a job never reads
//! a half-written list.

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
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let entry = match fields.as_slice() {
            [uid, exe, captures, expires, reason] => (|| {
                Some(Entry {
                    uid: uid.parse().ok()?,
                    exe: exe.to_string(),
                    captures_left: captures.parse().ok()?,
                    expires_unix: expires.parse().ok()?,
                    reason: reason.to_string(),
                })
            })(),
            _ => None,
        };
        match entry {
            Some(e) if !e.exe.is_empty() => entries.push(e),
            _ => problems.push(format!(
                "line {}: not `uid<TAB>exe<TAB>captures<TAB>expiry<TAB>reason`: {line:?}",
                index + 1
            )),
        }
    }
    (entries, problems)
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
