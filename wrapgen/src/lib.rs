//! mpistat-wrapgen: generates the profiler's MPI wrappers from the spec table.
//!
//! The spec table `profiler/spec/mpi.spec` has one row per C routine of `mpi.h`: its class, its C
//! prototype and its semantics (which arguments give the data's count, type, peer, root,
//! communicator; hooks; whether a wrapper is generated). From it this crate emits
//! `profiler/src/generated/<family>/{routines,wrappers,sigcheck}.rs` for each MPI family, from
//! the rows that family's `mpi.h` declares (the `families(...)` term; default: every family), and
//! the front library's list of exported names, `front/src/generated.rs` (every family's rows).
//!
//! Modules: [`spec`] reads the table (rows plus problems with line numbers), [`cdecl`] parses the
//! C prototypes and maps their types to bindgen's, [`semantics`] reads the semantics column,
//! [`emit`] writes the Rust files.

pub mod cdecl;
pub mod emit;
pub mod semantics;
pub mod spec;

use spec::{parse_spec, Family, Row, SpecErrors};
use std::path::{Path, PathBuf};

/// The spec table, relative to the workspace root.
pub const SPEC_PATH: &str = "profiler/spec/mpi.spec";

/// The directory of the generated files, relative to the workspace root: one subdirectory per
/// family (`openmpi/`, `mpich/`), each with `routines.rs`, `wrappers.rs` and `sigcheck.rs`.
pub const GENERATED_DIR: &str = "profiler/src/generated";
/// The front library's exported names, relative to the workspace root.
pub const FRONT_PATH: &str = "front/src/generated.rs";

/// Errors of the generator.
#[derive(Debug, thiserror::Error)]
pub enum WrapgenError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Spec(#[from] SpecErrors),
}

/// One generated file: where it goes (relative to the workspace root) and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    pub path: String,
    pub contents: String,
}

/// The rows of the routines `family`'s `mpi.h` declares, in table order.
pub fn rows_of(rows: &[Row], family: Family) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.declared_by(family))
        .cloned()
        .collect()
}

/// Generates every file from the text of the spec table: for each family, its routine table,
/// wrappers and signature check, from the rows it declares.
pub fn generate(spec_text: &str) -> Result<Vec<GeneratedFile>, SpecErrors> {
    let rows = parse_spec(spec_text).into_result()?;
    let mut files = Vec::new();
    for family in Family::ALL {
        let rows = rows_of(&rows, family);
        let dir = format!("{GENERATED_DIR}/{}", family.as_str());
        for (name, contents) in [
            ("routines.rs", emit::routines_rs(&rows)),
            ("wrappers.rs", emit::wrappers_rs(&rows)),
            ("sigcheck.rs", emit::sigcheck_rs(&rows)),
        ] {
            files.push(GeneratedFile {
                path: format!("{dir}/{name}"),
                contents,
            });
        }
    }
    files.push(GeneratedFile {
        path: FRONT_PATH.to_string(),
        contents: emit::front_rs(&rows),
    });
    Ok(files)
}

/// The workspace root (this crate lives in `<root>/wrapgen`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("wrapgen lives inside the workspace")
        .to_path_buf()
}

fn read(path: PathBuf) -> Result<String, WrapgenError> {
    std::fs::read_to_string(&path).map_err(|source| WrapgenError::Read { path, source })
}

/// Generates every file from the workspace's spec table.
pub fn generate_in(root: &Path) -> Result<Vec<GeneratedFile>, WrapgenError> {
    Ok(generate(&read(root.join(SPEC_PATH))?)?)
}

/// The generated files whose committed contents differ from what the spec table gives.
pub fn stale_files(root: &Path) -> Result<Vec<String>, WrapgenError> {
    let mut stale = Vec::new();
    for file in generate_in(root)? {
        let current = std::fs::read_to_string(root.join(&file.path)).unwrap_or_default();
        if current != file.contents {
            stale.push(file.path);
        }
    }
    Ok(stale)
}

/// Rewrites the generated files that changed; returns their paths.
pub fn write_files(root: &Path) -> Result<Vec<String>, WrapgenError> {
    let mut written = Vec::new();
    for file in generate_in(root)? {
        let path = root.join(&file.path);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(file.contents.as_str()) {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|source| WrapgenError::Write {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, &file.contents)
                .map_err(|source| WrapgenError::Write { path, source })?;
            written.push(file.path);
        }
    }
    Ok(written)
}
