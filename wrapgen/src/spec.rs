//! Reading the spec table `profiler/spec/mpi.spec`: rows of `class | C prototype | semantics`,
//! `#` comments and blank lines. Parsing never stops at the first bad row: it returns the good
//! rows together with every problem found, each with its line number.

use crate::cdecl::{DeclError, Prototype};
use crate::semantics::{Semantics, SemanticsError, Wrapping};
use std::collections::HashMap;
use std::fmt;

/// The class of a routine (mirrors the profiler's `spec::Class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    P2p,
    Collective,
    OneSided,
    Io,
    Datatype,
    Comm,
    Topology,
    Misc,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::P2p,
        Class::Collective,
        Class::OneSided,
        Class::Io,
        Class::Datatype,
        Class::Comm,
        Class::Topology,
        Class::Misc,
    ];

    /// The spelling in the spec table.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::P2p => "p2p",
            Class::Collective => "collective",
            Class::OneSided => "one-sided",
            Class::Io => "io",
            Class::Datatype => "datatype",
            Class::Comm => "comm",
            Class::Topology => "topology",
            Class::Misc => "misc",
        }
    }

    /// The variant of the profiler's `spec::Class`.
    pub fn rust_variant(self) -> &'static str {
        match self {
            Class::P2p => "P2p",
            Class::Collective => "Collective",
            Class::OneSided => "OneSided",
            Class::Io => "Io",
            Class::Datatype => "Datatype",
            Class::Comm => "Comm",
            Class::Topology => "Topology",
            Class::Misc => "Misc",
        }
    }

    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// An MPI family (ABI) the profiler is built for: each has its own generated files in
/// `profiler/src/generated/<dir>/`, compiled under `--cfg mpistat_family="<dir>"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    OpenMpi,
    Mpich,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::OpenMpi, Family::Mpich];

    /// The spelling in the spec table, the `mpistat_family` cfg value and the directory name.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::OpenMpi => "openmpi",
            Family::Mpich => "mpich",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// One routine of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// 1-based line number in the spec file.
    pub line: usize,
    pub class: Class,
    pub prototype: Prototype,
    pub semantics: Semantics,
}

impl Row {
    pub fn name(&self) -> &str {
        &self.prototype.name
    }

    /// The row has a routine id in the profiler's table (everything but passthrough rows).
    pub fn has_id(&self) -> bool {
        self.semantics.wrapping != Wrapping::Passthrough
    }

    /// Whether `family`'s `mpi.h` declares the routine.
    pub fn declared_by(&self, family: Family) -> bool {
        self.semantics
            .families
            .as_ref()
            .is_none_or(|f| f.contains(&family))
    }

    /// The generator emits a wrapper for this row.
    pub fn has_wrapper(&self) -> bool {
        self.semantics.wrapping == Wrapping::Generated
    }
}

/// What is wrong with one line of the spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("expected 3 `|`-separated columns (class | prototype | semantics), found {0}")]
    Columns(usize),
    #[error(
        "unknown class `{0}` (p2p, collective, one-sided, io, datatype, comm, topology, misc)"
    )]
    UnknownClass(String),
    #[error("prototype: {0}")]
    Prototype(#[from] DeclError),
    #[error("routine `{0}` is not named MPI_*")]
    NotMpi(String),
    #[error("semantics: {0}")]
    Semantics(#[from] SemanticsError),
    #[error("`{name}` already has a row at line {first_line}")]
    Duplicate { name: String, first_line: usize },
    #[error(
        "`{name}` returns `{ret}`: only int and double routines get wrappers (use passthrough)"
    )]
    UnwrappableReturn { name: String, ret: String },
    #[error("`{0}` is variadic: mark it handwritten")]
    Variadic(String),
}

/// A problem and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub error: RowError,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.error)
    }
}

/// Every problem of a spec that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} problem(s) in the spec table:\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct SpecErrors(pub Vec<Problem>);

/// The rows that could be read, and the problems of those that could not.
#[derive(Debug, Clone)]
pub struct ParsedSpec {
    pub rows: Vec<Row>,
    pub problems: Vec<Problem>,
}

impl ParsedSpec {
    /// The rows, or every problem.
    pub fn into_result(self) -> Result<Vec<Row>, SpecErrors> {
        if self.problems.is_empty() {
            Ok(self.rows)
        } else {
            Err(SpecErrors(self.problems))
        }
    }
}

fn parse_row(text: &str) -> Result<(Class, Prototype, Semantics), Vec<RowError>> {
    let columns: Vec<&str> = text.split('|').map(str::trim).collect();
    let [class, prototype, semantics] = columns[..] else {
        return Err(vec![RowError::Columns(columns.len())]);
    };
    let class = Class::parse(class).ok_or_else(|| RowError::UnknownClass(class.into()));
    let prototype = Prototype::parse(prototype).map_err(RowError::from);
    let semantics = Semantics::parse(semantics).map_err(RowError::from);
    let (class, prototype, semantics) = match (class, prototype, semantics) {
        (Ok(c), Ok(p), Ok(s)) => (c, p, s),
        (c, p, s) => return Err([c.err(), p.err(), s.err()].into_iter().flatten().collect()),
    };
    let mut errors: Vec<RowError> = semantics
        .check_arguments(&prototype)
        .into_iter()
        .map(RowError::from)
        .collect();
    let name = &prototype.name;
    if !name.starts_with("MPI_") {
        errors.push(RowError::NotMpi(name.clone()));
    }
    let ret = prototype.ret.to_string();
    if semantics.wrapping == Wrapping::Generated {
        if ret != "int" && ret != "double" {
            errors.push(RowError::UnwrappableReturn {
                name: name.clone(),
                ret,
            });
        }
        if prototype.variadic {
            errors.push(RowError::Variadic(name.clone()));
        }
    }
    if errors.is_empty() {
        Ok((class, prototype, semantics))
    } else {
        Err(errors)
    }
}

/// Parses the whole table.
pub fn parse_spec(text: &str) -> ParsedSpec {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        match parse_row(content) {
            Ok((class, prototype, semantics)) => {
                if let Some(&first) = first_line.get(&prototype.name) {
                    let error = RowError::Duplicate {
                        name: prototype.name.clone(),
                        first_line: first,
                    };
                    problems.push(Problem { line, error });
                    continue;
                }
                first_line.insert(prototype.name.clone(), line);
                rows.push(Row {
                    line,
                    class,
                    prototype,
                    semantics,
                });
            }
            Err(errors) => problems.extend(errors.into_iter().map(|error| Problem { line, error })),
        }
    }
    ParsedSpec { rows, problems }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantics::{Count, Hook, Side, TrafficPlan};

    #[test]
    fn reads_rows_comments_and_blank_lines() {
        let spec = "# comment\n\np2p | int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) | send(count, datatype) peer(dest) comm(comm)\n  misc | int MPI_Finalize(void) | hook(finalize)\n";
        let parsed = parse_spec(spec);
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let rows = parsed.rows;
        assert_eq!((rows.len(), rows[0].line, rows[1].line), (2, 3, 4));
        assert_eq!(rows[0].class, Class::P2p);
        assert_eq!(
            rows[0].semantics.traffic().unwrap(),
            TrafficPlan::Elements {
                side: Side {
                    count: Count::Arg("count".into()),
                    datatype: "datatype".into()
                },
                peer: Some("dest".into()),
                in_place: None,
            }
        );
        assert_eq!(rows[1].semantics.hook, Some(Hook::Finalize));
    }

    #[test]
    fn malformed_spec_reports_every_problem_with_its_line() {
        let spec = "\
p2p | int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) | send(count, datatype) peer(dest)
p2p | int MPI_Bsend(const void *buf, int count) | send(count, datatype)
# a comment
p2q | int MPI_Ssend(const void *buf) | -
p2p | int MPI_Rsend(const void *buf, long n) | -
p2p | int MPI_Isend(const void *buf, int count, MPI_Datatype datatype) | send(count, datatype) peer(dest) sideways(1)
just one column
p2p | int MPI_Send(void) | -
p2p | int MPI_Irecv(void *buf, MPI_Aint count, MPI_Datatype datatype) | recv(count, datatype)
p2p | int MPI_Recv(void *buf, int count, MPI_Datatype datatype) | status(status)
";
        let parsed = parse_spec(spec);
        let lines: Vec<usize> = parsed.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [2, 4, 5, 6, 7, 8, 9, 10], "{:#?}", parsed.problems);
        assert_eq!(parsed.rows.len(), 1);
        let e = |i: usize| &parsed.problems[i].error;
        assert!(
            matches!(e(0), RowError::Semantics(SemanticsError::NoSuchArgument { arg, .. }) if arg == "datatype")
        );
        assert!(matches!(e(1), RowError::UnknownClass(c) if c == "p2q"));
        assert!(matches!(
            e(2),
            RowError::Prototype(DeclError::UnsupportedType(_))
        ));
        assert!(
            matches!(e(3), RowError::Semantics(SemanticsError::UnknownTerm(t)) if t == "sideways")
        );
        assert!(matches!(e(4), RowError::Columns(1)));
        assert!(matches!(e(5), RowError::Duplicate { first_line: 1, .. }));
        assert!(matches!(
            e(6),
            RowError::Semantics(SemanticsError::WrongArgumentType { .. })
        ));
        assert!(matches!(
            e(7),
            RowError::Semantics(SemanticsError::Inconsistent(_))
        ));
        let message = parsed.into_result().unwrap_err().to_string();
        assert!(
            message.starts_with("8 problem(s)") && message.contains("line 7: expected 3"),
            "{message}"
        );
    }

    #[test]
    fn one_line_can_have_several_problems() {
        let parsed = parse_spec("bogus | int MPI_X(long y) | nope\n");
        assert_eq!(parsed.problems.len(), 3);
        assert!(parsed.problems.iter().all(|p| p.line == 1));
    }

    #[test]
    fn semantics_language() {
        use crate::semantics::Semantics;
        assert!(Semantics::parse("-").unwrap().traffic().unwrap() == TrafficPlan::None);
        assert!(matches!(
            Semantics::parse("send(count datatype)"),
            Err(SemanticsError::Arity { .. })
        ));
        assert!(matches!(
            Semantics::parse("send(count, datatype"),
            Err(SemanticsError::Syntax(_))
        ));
        assert!(matches!(
            Semantics::parse("peer(a) peer(b)"),
            Err(SemanticsError::Repeated(_))
        ));
        assert!(matches!(
            Semantics::parse("hook(start)"),
            Err(SemanticsError::UnknownHook(_))
        ));
        assert!(matches!(
            Semantics::parse("per_rank(c, t)"),
            Err(SemanticsError::Inconsistent(_))
        ));
        assert!(matches!(
            Semantics::parse("send(a, b) recv(c, d)"),
            Err(SemanticsError::Inconsistent(_))
        ));
        assert!(matches!(
            Semantics::parse("handwritten passthrough"),
            Err(SemanticsError::Inconsistent(_))
        ));
        let plan = Semantics::parse("send(1, datatype) peer(target_rank)")
            .unwrap()
            .traffic()
            .unwrap();
        assert!(matches!(
            plan,
            TrafficPlan::Elements {
                side: Side {
                    count: Count::Literal(1),
                    ..
                },
                ..
            }
        ));
        let plan = Semantics::parse("send(c, t) in_place(rb, 0, st) root(root) to(root) comm(k)")
            .unwrap()
            .traffic()
            .unwrap();
        assert!(matches!(
            plan,
            TrafficPlan::Elements {
                in_place: Some(_),
                peer: Some(_),
                ..
            }
        ));
        for (terms, why) in [
            ("send(c, t) to(all)", "to needs comm"),
            ("send(c, t) comm(k) to(root)", "to(root) needs root"),
            ("send(c, t) comm(k) to(nowhere)", "unknown destination"),
            ("per_rank(cs, t) comm(k)", "per_rank needs to"),
            ("recv(c, t) posts", "posts needs request"),
            (
                "recv(c, t) request(r) posts persistent(r)",
                "one later term",
            ),
            ("comm(k) persistent(r)", "persistent needs traffic"),
            ("flag(f)", "flag needs completes"),
        ] {
            assert!(Semantics::parse(terms).is_err(), "{why}: {terms}");
        }
    }
}
