//! `mpistat show`: read syslog files, decode the records in them, print each one.
//!
//! Records go to `out` (readable text or one JSON line each), problems to `err` one line each,
//! analysis records (`mpistat analyze --send`) one line each to `err`, and a final
//! `N records, M problems` line to `err`. A file that cannot be read is reported and
//! skipped; the caller turns that into a failing exit status.

use mpistat_record::{Assembler, Decoded};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// What `show` reads and how it prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShowOptions {
    /// One JSON object per job and line instead of the readable report.
    pub json: bool,
    /// Syslog files to read (`-` for standard input).
    pub files: Vec<PathBuf>,
}

/// What `show` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub records: usize,
    pub problems: usize,
    pub unreadable_inputs: usize,
}

/// Run `show` over `options.files`; `-` reads `stdin`. Errors only when writing the output fails.
pub fn run(
    options: &ShowOptions,
    mut stdin: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> std::io::Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut assembler = Assembler::new();
    for path in &options.files {
        let name = path.display().to_string();
        let content = if path == Path::new("-") {
            read_all(&mut stdin)
        } else {
            std::fs::read(path)
        };
        let content = match content {
            Ok(content) => content,
            Err(e) => {
                writeln!(err, "mpistat: cannot read {name}: {e}")?;
                outcome.unreadable_inputs += 1;
                continue;
            }
        };
        assembler.begin_source(&name);
        for line in content.split(|&b| b == b'\n') {
            assembler.push(line);
        }
        print(
            assembler.take_decoded(),
            options.json,
            out,
            err,
            &mut outcome,
        )?;
    }
    print(assembler.finish(), options.json, out, err, &mut outcome)?;
    writeln!(
        err,
        "{} records, {} problems",
        outcome.records, outcome.problems
    )?;
    Ok(outcome)
}

fn read_all(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut content = Vec::new();
    input.read_to_end(&mut content)?;
    Ok(content)
}

fn print(
    decoded: Decoded,
    json: bool,
    out: &mut impl Write,
    err: &mut impl Write,
    outcome: &mut Outcome,
) -> std::io::Result<()> {
    for problem in &decoded.problems {
        writeln!(err, "mpistat: {problem}")?;
    }
    for record in &decoded.records {
        if json {
            writeln!(out, "{}", crate::json::render(record))?;
        } else {
            if outcome.records > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", mpistat_record::report::render(record))?;
        }
        outcome.records += 1;
    }
    // Analysis records (`mpistat analyze --send`) are not job records: one line each, on `err`
    // with the problems, so that `out` stays the records' text or JSON.
    for a in &decoded.analyses {
        let outcome = match (&a.summary, &a.error) {
            (Some(_), _) => "analysed".to_string(),
            (None, error) => format!("failed: {}", error.as_deref().unwrap_or("no summary")),
        };
        writeln!(
            err,
            "mpistat: analysis of job {} by {} (uid {}, claimed) of {}: {outcome}",
            a.job_key, a.user, a.uid, a.dir
        )?;
    }
    outcome.problems += decoded.problems.len();
    Ok(())
}
