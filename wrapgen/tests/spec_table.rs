//! Tests of the committed spec table against the installed mpi.h and the committed generated
//! files.

use mpistat_wrapgen::spec::{parse_spec, Class, Family, Row};
use mpistat_wrapgen::{emit, generate_in, rows_of, workspace_root, SPEC_PATH};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

fn rows() -> Vec<Row> {
    let text = std::fs::read_to_string(workspace_root().join(SPEC_PATH)).expect("spec table");
    parse_spec(&text)
        .into_result()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn generated_files_are_fresh() {
    let root = workspace_root();
    for file in generate_in(&root).unwrap() {
        let committed = std::fs::read_to_string(root.join(&file.path)).unwrap_or_default();
        assert!(
            committed == file.contents,
            "{} is stale: it differs from what {SPEC_PATH} gives. Run `cargo run -p mpistat-wrapgen` and commit the result.",
            file.path
        );
    }
}

/// The directories holding `family`'s mpi.h, as the profiler's build script finds them (crate
/// `mpistat-build-mpi`), or `None` when that family is not installed.
fn mpi_include_dirs(family: Family) -> Option<Vec<String>> {
    let family = match family {
        Family::OpenMpi => mpistat_build_mpi::Family::OpenMpi,
        Family::Mpich => mpistat_build_mpi::Family::Mpich,
    };
    let dirs = family.include_dirs()?;
    Some(dirs.iter().map(|p| p.display().to_string()).collect())
}

/// `family`'s mpi.h as the C compiler sees it: comments gone, conditionals resolved (e.g. the
/// MPI-1 routines removed in MPI-3.0 that a default Open MPI 4 build leaves out), macros
/// expanded.
fn preprocessed_mpi_h(dirs: &[String]) -> String {
    let mut cmd = Command::new("cc");
    cmd.args(["-E", "-P", "-x", "c", "-"]);
    for dir in dirs {
        cmd.arg(format!("-I{dir}"));
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cc -E");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"#include <mpi.h>\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "cc -E on mpi.h failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Names of the functions `MPI_*` that the C text declares: an identifier starting with `MPI_`
/// followed by `(` outside any parentheses of its declaration (so neither `PMPI_X`, nor
/// typedefs of function types `typedef int (MPI_X)(...)`, nor the return type of MPICH's
/// `typedef MPI_Aint (QMPI_X_t)(...)`, nor names inside attributes).
fn declared_mpi_functions(c: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut after_typedef = false;
    let mut chars = c.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        if in_string {
            match ch {
                '\\' => _ = chars.next(),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' | '{' | '}' => depth = 0,
            c0 if c0.is_ascii_alphabetic() || c0 == '_' => {
                let mut end = i + c0.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' {
                        end = j + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                let word = &c[i..end];
                let next_non_space = c[end..].trim_start().chars().next();
                if depth == 0
                    && !after_typedef
                    && word.starts_with("MPI_")
                    && next_non_space == Some('(')
                {
                    names.push(word.to_string());
                }
                after_typedef = word == "typedef";
            }
            _ => {}
        }
    }
    names
}

#[test]
fn declaration_scanner_handles_the_header_forms() {
    let c = "int MPI_Send(const void *buf,\n int count);\n__attribute__((visibility(\"default\"))) double\nMPI_Wtime(void);\nint PMPI_Send(int);\ntypedef int (MPI_User_function)(void *);\ntypedef MPI_Aint (QMPI_Aint_add_t) (int tool_id, MPI_Aint base);\nint MPI_T_finalize (void) __attribute__((deprecated(\"use MPI_Foo(); instead\")));\n";
    assert_eq!(
        declared_mpi_functions(c),
        ["MPI_Send", "MPI_Wtime", "MPI_T_finalize"]
    );
}

/// For every installed family (both on the development machine and in CI, which installs both:
/// `scripts/prereqs.sh`): the rows it declares are exactly the routines of its mpi.h.
#[test]
fn table_covers_exactly_the_routines_of_each_installed_mpi_h() {
    let mut checked = Vec::new();
    for family in Family::ALL {
        let Some(dirs) = mpi_include_dirs(family) else {
            eprintln!(
                "{} is not installed: its mpi.h is not checked",
                family.as_str()
            );
            continue;
        };
        covers_exactly(family, &declared_mpi_functions(&preprocessed_mpi_h(&dirs)));
        checked.push(family);
    }
    assert!(!checked.is_empty(), "no MPI family installed");
    if std::env::var_os("MPISTAT_REQUIRE_ALL_FAMILIES").is_some() {
        assert_eq!(checked, Family::ALL, "some family's mpi.h was not found");
    }
}

fn covers_exactly(family: Family, declared: &[String]) {
    assert!(
        declared.len() > 350,
        "found only {} MPI_ routines in {}'s mpi.h",
        declared.len(),
        family.as_str()
    );
    let mut rows_per_name: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows_of(&rows(), family) {
        *rows_per_name.entry(row.name().to_string()).or_default() += 1;
    }
    let missing: Vec<&String> = declared
        .iter()
        .filter(|n| !rows_per_name.contains_key(*n))
        .collect();
    let repeated: Vec<&String> = rows_per_name
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(name, _)| name)
        .collect();
    let unknown: Vec<&String> = rows_per_name
        .keys()
        .filter(|n| !declared.contains(n))
        .collect();
    let family = family.as_str();
    assert!(
        missing.is_empty(),
        "routines of {family}'s mpi.h without a row (of that family) in {SPEC_PATH}: {missing:?}"
    );
    assert!(
        repeated.is_empty(),
        "routines with several rows: {repeated:?}"
    );
    assert!(
        unknown.is_empty(),
        "rows of {family} routines that its mpi.h does not declare: {unknown:?}"
    );
}

#[test]
fn traffic_semantics_name_arguments_of_the_prototype() {
    for row in rows() {
        let problems = row.semantics.check_arguments(&row.prototype);
        assert!(
            problems.is_empty(),
            "line {} ({}): {problems:?}",
            row.line,
            row.name()
        );
    }
}

#[test]
fn every_data_moving_routine_has_traffic() {
    let counted: Vec<String> = rows()
        .iter()
        .filter(|r| emit::traffic_of(r) != "Traffic::None")
        .map(|r| r.name().to_string())
        .collect();
    for name in [
        "MPI_Send",
        "MPI_Isend",
        "MPI_Recv",
        "MPI_Irecv",
        "MPI_Sendrecv",
        "MPI_Sendrecv_replace",
        "MPI_Mrecv",
        "MPI_Bcast",
        "MPI_Ibcast",
        "MPI_Reduce",
        "MPI_Allreduce",
        "MPI_Iallreduce",
        "MPI_Gather",
        "MPI_Gatherv",
        "MPI_Scatter",
        "MPI_Scatterv",
        "MPI_Allgather",
        "MPI_Alltoall",
        "MPI_Alltoallv",
        "MPI_Reduce_scatter",
        "MPI_Put",
        "MPI_Get",
        "MPI_Fetch_and_op",
        "MPI_File_write",
        "MPI_File_read_at_all",
        "MPI_Pack",
        "MPI_Unpack",
        "MPI_Send_init",
        "MPI_Recv_init",
        "MPI_Alltoallw",
        "MPI_Neighbor_allgatherv",
        "MPI_Neighbor_alltoallv",
        "MPI_Neighbor_alltoallw",
        "MPI_File_iread",
    ] {
        assert!(counted.iter().any(|c| c == name), "{name} counts no data");
    }
    for name in [
        "MPI_Barrier",
        "MPI_Wait",
        "MPI_Start",
        "MPI_File_read_all_end",
    ] {
        assert!(
            !counted.iter().any(|c| c == name),
            "{name} should count no data"
        );
    }
}

#[test]
fn key_routines_map_to_the_documented_traffic() {
    let rows = rows();
    let traffic = |name: &str| emit::traffic_of(rows.iter().find(|r| r.name() == name).unwrap());
    assert_eq!(
        traffic("MPI_Send"),
        "Traffic::Elements { count: MPI_Count::from(count), datatype, peer: dest }"
    );
    assert_eq!(
        traffic("MPI_Recv"),
        "Traffic::Received { count: MPI_Count::from(count), datatype, status }"
    );
    assert_eq!(
        traffic("MPI_Irecv"),
        "Traffic::Elements { count: MPI_Count::from(count), datatype, peer: source }"
    );
    assert_eq!(
        traffic("MPI_Bcast"),
        "Traffic::Elements { count: MPI_Count::from(count), datatype, peer: root }"
    );
    assert_eq!(
        traffic("MPI_Allreduce"),
        "if sendbuf == traffic::IN_PLACE { Traffic::Elements { count: traffic::in_place(MPI_Count::from(count)), datatype, peer: traffic::NO_PEER } } else { Traffic::Elements { count: MPI_Count::from(count), datatype, peer: traffic::NO_PEER } }"
    );
    assert_eq!(
        traffic("MPI_Sendrecv_replace"),
        "Traffic::SendReceived { count: MPI_Count::from(count), datatype, peer: dest, recv_count: MPI_Count::from(count), recv_datatype: datatype, status }"
    );
    assert_eq!(
        traffic("MPI_Allgather"),
        "if sendbuf == traffic::IN_PLACE { Traffic::Elements { count: traffic::in_place(MPI_Count::from(recvcount)), datatype: recvtype, peer: traffic::NO_PEER } } else { Traffic::Elements { count: MPI_Count::from(sendcount), datatype: sendtype, peer: traffic::NO_PEER } }"
    );
    assert_eq!(
        traffic("MPI_Allgatherv"),
        "if sendbuf == traffic::IN_PLACE { Traffic::OwnBlock { counts: traffic::Counts::Int(recvcounts), datatype: recvtype } } else { Traffic::Elements { count: MPI_Count::from(sendcount), datatype: sendtype, peer: traffic::NO_PEER } }"
    );
    assert_eq!(
        traffic("MPI_Reduce_scatter"),
        "if sendbuf == traffic::IN_PLACE { Traffic::PerRank { counts: traffic::Counts::Int(recvcounts), datatype, peer: traffic::NO_PEER, in_place: true } } else { Traffic::PerRank { counts: traffic::Counts::Int(recvcounts), datatype, peer: traffic::NO_PEER, in_place: false } }"
    );
    assert_eq!(
        traffic("MPI_Alltoallw"),
        "if sendbuf == traffic::IN_PLACE { Traffic::PerRankTyped { counts: traffic::Counts::Int(recvcounts), datatypes: recvtypes, in_place: true } } else { Traffic::PerRankTyped { counts: traffic::Counts::Int(sendcounts), datatypes: sendtypes, in_place: false } }"
    );
    assert_eq!(
        traffic("MPI_Compare_and_swap"),
        "Traffic::Elements { count: 1, datatype, peer: target_rank }"
    );
    // The large-count variants take their counts as they are.
    assert_eq!(
        traffic("MPI_Send_c"),
        "Traffic::Elements { count, datatype, peer: dest }"
    );
    assert_eq!(
        traffic("MPI_Alltoallv_c"),
        "if sendbuf == traffic::IN_PLACE { Traffic::PerRank { counts: traffic::Counts::Large(recvcounts), datatype: recvtype, peer: traffic::NO_PEER, in_place: true } } else { Traffic::PerRank { counts: traffic::Counts::Large(sendcounts), datatype: sendtype, peer: traffic::NO_PEER, in_place: false } }"
    );
    let classes = |class: Class| rows.iter().filter(|r| r.class == class).count();
    assert!(Class::ALL.iter().all(|c| classes(*c) > 0));
}

/// "What is sent", the same way for every collective (docs/counting.md): each one that moves
/// data names its send blocks and their destinations, none counts a receive side.
#[test]
fn every_collective_counts_what_it_sends_to_its_destinations() {
    for row in rows().iter().filter(|r| r.class == Class::Collective) {
        let s = &row.semantics;
        assert!(s.recv.is_none(), "{}: counts a receive", row.name());
        let sends = s.send.is_some() || s.per_rank.is_some() || s.per_rank_types.is_some();
        assert_eq!(
            sends,
            s.reach.is_some(),
            "{}: a send side needs its destinations (to)",
            row.name()
        );
        if row.name().ends_with("_init") || row.name().ends_with("_init_c") {
            assert_eq!(sends, s.persistent.is_some(), "{}: persistent", row.name());
        }
    }
}

/// Every nonblocking receive counts what arrived, when its request completes: none counts
/// its posted size (docs/counting.md).
#[test]
fn nonblocking_receives_count_at_completion() {
    for row in rows() {
        let s = &row.semantics;
        let nonblocking_receive = s.recv.is_some() && s.request.is_some();
        assert_eq!(nonblocking_receive, s.posts, "{}", row.name());
    }
}
