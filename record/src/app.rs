//! Which application a process runs: its executable, or, when the executable is an interpreter
//! (Python, Julia, R and Rscript, the shells, Perl, Ruby), the script or module it was given.
//!
//! Every mpi4py job's executable is `/usr/bin/python3.11`; the application is the script
//! (`/home/alice/run.py`), `python -m MODULE`, or `python -c` for inline code (likewise
//! `julia -e`, `perl -e`, ...), with `python -m mpi4py SCRIPT` looked through to the script.
//! Pure: the profiler hands [`classify`] `/proc/self/exe`, the command line and the working
//! directory; nothing here panics, whatever the arguments.

/// What a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    /// What the job is filed, mailed and escalated under: the executable's path, or an
    /// interpreter's script (absolute path), `python -m MODULE`, `python -c`, `python -` (stdin
    /// or interactive).
    pub name: String,
    /// The interpreter's executable when `name` is a script or module run by it.
    pub interpreter: Option<String>,
}

/// The interpreters whose command lines we read, by how they name their program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Python,
    Julia,
    R,
    Rscript,
    Shell,
    Perl,
    Ruby,
}

/// `name` is `stem` followed by nothing but digits and dots (`python3.11`, `perl5.36.0`).
fn versioned(name: &str, stem: &str) -> bool {
    name.strip_prefix(stem)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The interpreter an executable's file name says it is, and the short name shown for it.
fn kind_of(base: &str) -> Option<(Kind, &str)> {
    let kind = match base {
        _ if versioned(base, "python") || versioned(base, "pypy") => (Kind::Python, "python"),
        "julia" => (Kind::Julia, "julia"),
        "R" => (Kind::R, "R"),
        "Rscript" => (Kind::Rscript, "Rscript"),
        "bash" | "sh" | "dash" | "zsh" | "ksh" | "mksh" => (Kind::Shell, base),
        _ if versioned(base, "perl") => (Kind::Perl, "perl"),
        _ if versioned(base, "ruby") => (Kind::Ruby, "ruby"),
        _ => return None,
    };
    Some(kind)
}

/// What the interpreter was told to run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Run<'a> {
    Script(&'a str),
    /// `-m MODULE` (Python).
    Module(&'a str),
    /// Inline code, with the option that gave it (`-c`, `-e`).
    Inline(&'static str),
    /// Standard input or interactive.
    Stdin,
}

/// The application of a process whose executable is `exe` (absolute), command line `argv`
/// (`argv[0]` first) and working directory `cwd` (to make a relative script absolute).
pub fn classify(exe: &str, argv: &[String], cwd: &str) -> Application {
    let base = exe.rsplit('/').next().unwrap_or(exe);
    let Some((kind, short)) = kind_of(base) else {
        return Application {
            name: exe.to_string(),
            interpreter: None,
        };
    };
    let args = argv.get(1..).unwrap_or(&[]);
    let run = match kind {
        Kind::Python => python(args),
        Kind::Julia => julia(args),
        Kind::R => r(args),
        Kind::Rscript => rscript(args),
        Kind::Shell => shell(args),
        Kind::Perl => perl(args),
        Kind::Ruby => ruby(args),
    };
    let name = match run {
        Run::Script("") | Run::Stdin => format!("{short} -"),
        Run::Script(path) => absolute(path, cwd),
        Run::Module(module) => format!("{short} -m {module}"),
        Run::Inline(option) => format!("{short} {option}"),
    };
    Application {
        name,
        interpreter: Some(exe.to_string()),
    }
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved by name.
fn absolute(path: &str, cwd: &str) -> String {
    let joined = if path.starts_with('/') || cwd.is_empty() {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    if joined.starts_with('/') {
        format!("/{}", parts.join("/"))
    } else if parts.is_empty() {
        // A relative path that names the working directory itself (`.`, `a/..`).
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// `python [options] (SCRIPT | -m MODULE | -c CMD | -) [args]`; `-m mpi4py` is looked through
/// (`python -m mpi4py [--rc K=V] SCRIPT`).
fn python(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "-" => return Run::Stdin,
            "--" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "--check-hash-based-pycs" | "--rc" => i += 2,
            long if long.starts_with("--") => i += 1,
            short if short.starts_with('-') => {
                let cluster = &short[1..];
                for (at, c) in cluster.char_indices() {
                    let rest = &cluster[at + c.len_utf8()..];
                    match c {
                        'c' => return Run::Inline("-c"),
                        'm' => {
                            let module = if rest.is_empty() {
                                args.get(i + 1).map(String::as_str)
                            } else {
                                Some(rest)
                            };
                            let Some(module) = module else {
                                return Run::Stdin;
                            };
                            let after = i + if rest.is_empty() { 2 } else { 1 };
                            if module == "mpi4py" {
                                match python(args.get(after..).unwrap_or(&[])) {
                                    Run::Stdin => {}
                                    inner => return inner,
                                }
                            }
                            return Run::Module(module);
                        }
                        'W' | 'X' => {
                            if rest.is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
                i += 1;
            }
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

/// `julia [switches] [--] [PROGRAMFILE] [args]`; `-e`/`-E`/`--eval`/`--print` run inline code.
fn julia(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "--" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "-e" | "-E" | "--eval" | "--print" => return Run::Inline("-e"),
            "-C" | "-J" | "-L" | "-p" | "-t" | "-H" | "-M" | "--load" => i += 2,
            option if option.starts_with('-') => i += 1,
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

/// `R [options] [-f FILE | --file=FILE | -e EXPR]`: what `Rscript FILE` runs too (it starts
/// `R --file=FILE`); `--args` ends R's own options.
fn r(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "--args" => break,
            "-f" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "-e" => return Run::Inline("-e"),
            option => {
                if let Some(file) = option.strip_prefix("--file=") {
                    return Run::Script(file);
                }
                i += 1;
            }
        }
    }
    Run::Stdin
}

/// `Rscript [options] (FILE | -e EXPR) [args]`.
fn rscript(args: &[String]) -> Run<'_> {
    for arg in args {
        match arg.as_str() {
            "-e" => return Run::Inline("-e"),
            option if option.starts_with('-') => {}
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

/// `bash [options] [SCRIPT | -c CMD | -s]` (also sh, dash, zsh, ksh).
fn shell(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "--" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file" => i += 2,
            option if option.starts_with("--") => i += 1,
            option if option.starts_with('-') || option.starts_with('+') => {
                if option.contains('c') && option.starts_with('-') {
                    return Run::Inline("-c");
                }
                if option.contains('s') && option.starts_with('-') {
                    return Run::Stdin;
                }
                i += 1;
            }
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

/// `perl [switches] [--] [PROGRAMFILE] [args]`; `-e`/`-E` (also in a cluster, `-le`) run
/// inline code; `-I`, `-M`, `-m`, `-x`, `-i`, `-0`, `-F`, `-C`, `-d`, `-D` take the rest of
/// their argument (`-I` also the next one).
fn perl(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "--" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "-" => return Run::Stdin,
            "-I" => i += 2,
            option if option.starts_with('-') => {
                for c in option[1..].chars() {
                    match c {
                        'e' | 'E' => return Run::Inline("-e"),
                        'I' | 'M' | 'm' | 'x' | 'i' | '0' | 'F' | 'C' | 'd' | 'D' => break,
                        _ => {}
                    }
                }
                i += 1;
            }
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

/// `ruby [switches] [--] [PROGRAMFILE] [args]`; `-e` runs inline code; `-I`, `-r`, `-C` take
/// the next argument when it is not attached.
fn ruby(args: &[String]) -> Run<'_> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "--" => return args.get(i + 1).map_or(Run::Stdin, |s| Run::Script(s)),
            "-" => return Run::Stdin,
            "-e" => return Run::Inline("-e"),
            "-I" | "-r" | "-C" => i += 2,
            option if option.starts_with('-') => i += 1,
            script => return Run::Script(script),
        }
    }
    Run::Stdin
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(exe: &str, argv: &str) -> (String, Option<String>) {
        let argv: Vec<String> = argv.split_whitespace().map(String::from).collect();
        let a = classify(exe, &argv, "/home/alice/proj");
        (a.name, a.interpreter)
    }

    fn name(exe: &str, argv: &str) -> String {
        app(exe, argv).0
    }

    const PY: &str = "/usr/bin/python3.11";

    #[test]
    fn native_programs_are_their_executable() {
        assert_eq!(
            app("/home/alice/bin/solver", "./solver -n 4"),
            ("/home/alice/bin/solver".into(), None)
        );
        // Names that only look like interpreters are not.
        assert_eq!(name("/opt/pythonic", "pythonic x.py"), "/opt/pythonic");
        assert_eq!(
            name("/opt/python-tool", "python-tool x.py"),
            "/opt/python-tool"
        );
    }

    #[test]
    fn python_scripts_modules_and_inline_code() {
        assert_eq!(
            app(PY, "python3 run.py --steps 10"),
            ("/home/alice/proj/run.py".into(), Some(PY.into()))
        );
        assert_eq!(
            name(PY, "python3 -u -W ignore ../x/./y.py"),
            "/home/alice/x/y.py"
        );
        assert_eq!(name(PY, "python -Wignore -X dev /abs/s.py"), "/abs/s.py");
        assert_eq!(name(PY, "python3 -uB s.py"), "/home/alice/proj/s.py");
        assert_eq!(name(PY, "python3 -m pytest -x tests"), "python -m pytest");
        assert_eq!(name(PY, "python3 -mpytest"), "python -m pytest");
        assert_eq!(name(PY, "python3 -c print(1)"), "python -c");
        assert_eq!(name(PY, "python3 -Ic x"), "python -c");
        assert_eq!(name(PY, "python3"), "python -");
        assert_eq!(name(PY, "python3 -"), "python -");
        assert_eq!(name(PY, "python3 -- -odd.py"), "/home/alice/proj/-odd.py");
        assert_eq!(
            name("/usr/bin/pypy3", "pypy3 a.py"),
            "/home/alice/proj/a.py"
        );
    }

    #[test]
    fn mpi4py_is_looked_through() {
        assert_eq!(
            name(PY, "python3 -m mpi4py app.py"),
            "/home/alice/proj/app.py"
        );
        assert_eq!(
            name(PY, "python3 -m mpi4py --rc thread_level=single app.py"),
            "/home/alice/proj/app.py"
        );
        assert_eq!(
            name(PY, "python3 -m mpi4py -m pkg.main"),
            "python -m pkg.main"
        );
        assert_eq!(name(PY, "python3 -m mpi4py -c x"), "python -c");
        assert_eq!(name(PY, "python3 -m mpi4py"), "python -m mpi4py");
    }

    #[test]
    fn other_interpreters() {
        let julia = "/opt/julia-1.10/bin/julia";
        assert_eq!(
            app(julia, "julia -t 4 --project=. sim.jl 3"),
            ("/home/alice/proj/sim.jl".into(), Some(julia.into()))
        );
        assert_eq!(name(julia, "julia -e using(MPI)"), "julia -e");
        let r = "/usr/lib/R/bin/exec/R";
        assert_eq!(
            name(
                r,
                "/usr/lib/R/bin/exec/R --no-echo --no-restore --file=fit.R --args 3"
            ),
            "/home/alice/proj/fit.R"
        );
        assert_eq!(name(r, "R -f /x/fit.R"), "/x/fit.R");
        assert_eq!(name(r, "R --no-save"), "R -");
        assert_eq!(
            name("/usr/bin/Rscript", "Rscript --vanilla fit.R"),
            "/home/alice/proj/fit.R"
        );
        assert_eq!(name("/usr/bin/Rscript", "Rscript -e 1"), "Rscript -e");
        assert_eq!(
            name("/usr/bin/bash", "bash -x -o pipefail job.sh"),
            "/home/alice/proj/job.sh"
        );
        assert_eq!(name("/usr/bin/dash", "sh -c exec"), "dash -c");
        assert_eq!(
            name("/usr/bin/perl", "perl -I lib -w tool.pl"),
            "/home/alice/proj/tool.pl"
        );
        assert_eq!(
            name("/usr/bin/perl", "perl -Ilib -w tool.pl"),
            "/home/alice/proj/tool.pl"
        );
        assert_eq!(name("/usr/bin/perl", "perl -le print"), "perl -e");
        assert_eq!(
            name("/usr/bin/ruby3.1", "ruby -I lib x.rb"),
            "/home/alice/proj/x.rb"
        );
        assert_eq!(name("/usr/bin/ruby3.1", "ruby -e 1"), "ruby -e");
    }

    #[test]
    fn relative_scripts_without_a_working_directory_stay_relative() {
        let argv = ["python3".to_string(), "./a/../b.py".to_string()];
        assert_eq!(classify(PY, &argv, "").name, "b.py");
        assert_eq!(absolute("/../..", "/x"), "/");
        // Found by the property test: a script named `.` must still name something.
        assert_eq!(absolute(".", ""), ".");
        assert_eq!(absolute("a/..", ""), ".");
    }
}
