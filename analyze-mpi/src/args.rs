//! The command line of `mpistat-analyze`, read by hand: the program runs in the user's job step,
//! so it takes no argument parser crate (clap is the `mpistat` binary's alone).

use mpistat_analysis_report::{AnalyzeOptions, Format};
use std::ffi::OsString;
use std::path::PathBuf;

pub const USAGE: &str = "\
The mpistat trace analysis as an MPI program: start it with `mpirun -n N` or `srun -n N`.

Usage: mpistat-analyze [OPTIONS] <TRACE_DIR>

Arguments:
  <TRACE_DIR>  Directory with `definitions.mpt` (or the profiler's `local-NNNNNN.mpt`) and one
               `rank-NNNNNN.mpt` per rank; or an OTF2 archive (Score-P's): its `traces.otf2` or
               the directory holding it

Options:
      --format <FORMAT>      Report format [default: text] [possible values: text, json, html,
                             summary (the summary --send sends, JSON), wait-states (the forward
                             replay's wait states, one per row, JSON)]
      --send                 Send the summary to syslog as your record of the traced job (for its
                             weekly mail and job page), as `mpistat analyze --send` does, instead
                             of printing a report; the directory must be yours, as the profiler
                             wrote it. For the batch script's last step or a TaskEpilog
      --config <CONFIG>      The site configuration for --send and the memory limit (default:
                             $MPISTAT_CONFIG, else /etc/mpistat/site.toml)
      --memory-limit <BYTES> Memory each process may use, in bytes (default: the site's
                             [escalation] analysis_memory_bytes; 0 there: 3/4 of the node's or
                             the cgroup's memory, shared by the processes on the node). A trace
                             whose estimated need is more fails before it is read
      --perfetto <FILE>      Also write the timeline, critical path marked, as Chrome/Perfetto
                             trace JSON here (each process its ranks' tracks, the same file as
                             `mpistat analyze --perfetto` writes)
      --otf2 <OUT>           Also write the trace as an OTF2 archive into this new directory
                             (OUT/traces.otf2), each process its own ranks, as `mpistat analyze
                             --otf2` writes it
  -h, --help                 Print help
  -V, --version              Print version
";

/// What the command line asks for: an analysis as `mpistat analyze` runs it, or `--send`.
#[derive(Debug)]
pub struct Args {
    pub options: AnalyzeOptions,
    pub send: bool,
}

/// What to do instead of an analysis, or why the command line is wrong.
#[derive(Debug, PartialEq)]
pub enum NotRun {
    Help,
    Version,
    /// A usage error, in words.
    Wrong(String),
}

/// Reads the arguments after the program's name.
pub fn parse(arguments: impl IntoIterator<Item = OsString>) -> Result<Args, NotRun> {
    let wrong = |what: String| NotRun::Wrong(what);
    let mut arguments = arguments.into_iter();
    let (mut format, mut send, mut config, mut memory_limit, mut perfetto, mut otf2) =
        (None, false, None, None, None, None);
    let mut trace_dir: Option<PathBuf> = None;
    let mut only_paths = false;
    while let Some(argument) = arguments.next() {
        let text = argument.to_string_lossy().into_owned();
        if only_paths || !text.starts_with('-') || text == "-" {
            if trace_dir.replace(PathBuf::from(argument)).is_some() {
                return Err(wrong(format!("unexpected argument '{text}'")));
            }
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                (name.to_string(), Some(OsString::from(value)))
            }
            _ => (text.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| arguments.next())
                .ok_or_else(|| wrong(format!("a value is required for '{name}'")))
        };
        match name.as_str() {
            "--" => only_paths = true,
            "-h" | "--help" => return Err(NotRun::Help),
            "-V" | "--version" => return Err(NotRun::Version),
            "--send" if inline.is_none() => send = true,
            "--format" => {
                let value = value()?;
                let name = value.to_string_lossy();
                format = Some(name.parse().map_err(|e| wrong(format!("--format: {e}")))?);
            }
            "--config" => config = Some(PathBuf::from(value()?)),
            "--memory-limit" => {
                let value = value()?;
                let bytes = value.to_string_lossy();
                memory_limit = Some(bytes.parse().map_err(|_| {
                    wrong(format!(
                        "--memory-limit: {bytes:?} is not a number of bytes"
                    ))
                })?);
            }
            "--perfetto" => perfetto = Some(PathBuf::from(value()?)),
            "--otf2" => otf2 = Some(PathBuf::from(value()?)),
            _ => return Err(wrong(format!("unexpected argument '{text}'"))),
        }
    }
    if send {
        let conflict = [
            ("--format", format.is_some()),
            ("--perfetto", perfetto.is_some()),
            ("--otf2", otf2.is_some()),
        ];
        if let Some((option, _)) = conflict.iter().find(|(_, given)| *given) {
            return Err(wrong(format!(
                "the argument '--send' cannot be used with '{option}'"
            )));
        }
    }
    let trace_dir =
        trace_dir.ok_or_else(|| wrong("the trace directory is required".to_string()))?;
    Ok(Args {
        options: AnalyzeOptions {
            trace_dir,
            format: format.unwrap_or(Format::Text),
            perfetto,
            otf2,
            memory_limit,
            config,
        },
        send,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<Args, NotRun> {
        parse(words.iter().map(OsString::from))
    }

    #[test]
    fn options_take_their_values_either_way() {
        let args = parse_words(&[
            "--format",
            "wait-states",
            "--memory-limit=1000",
            "--perfetto",
            "t.json",
            "--otf2=out",
            "--config",
            "site.toml",
            "dir",
        ])
        .unwrap();
        let options = &args.options;
        assert!(!args.send);
        assert_eq!(options.format, Format::WaitStates);
        assert_eq!(options.config, Some("site.toml".into()));
        assert_eq!(options.memory_limit, Some(1000));
        assert_eq!(options.perfetto, Some("t.json".into()));
        assert_eq!(options.otf2, Some("out".into()));
        assert_eq!(options.trace_dir, PathBuf::from("dir"));
        assert_eq!(
            parse_words(&["--", "-dir"]).unwrap().options.trace_dir,
            PathBuf::from("-dir")
        );
        assert_eq!(parse_words(&["dir"]).unwrap().options.format, Format::Text);
    }

    #[test]
    fn wrong_command_lines_are_refused() {
        for words in [
            &["--send", "--format", "json", "dir"][..],
            &["--send", "--perfetto", "t.json", "dir"],
            &["--format", "xml", "dir"],
            &["--memory-limit", "lots", "dir"],
            &["--perfetto"],
            &["one", "two"],
            &["--unknown", "dir"],
            &["--send=yes", "dir"],
            &[],
        ] {
            assert!(
                matches!(parse_words(words), Err(NotRun::Wrong(_))),
                "{words:?}"
            );
        }
        assert!(matches!(parse_words(&["dir", "--help"]), Err(NotRun::Help)));
        assert!(matches!(parse_words(&["-V"]), Err(NotRun::Version)));
        assert!(parse_words(&["--send", "dir"]).unwrap().send);
    }
}
