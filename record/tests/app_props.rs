//! Property test of the application classifier: any command line of any interpreter (or of a
//! native program) gives an application without panicking, and only interpreters name one.

use mpistat_record::app::classify;
use proptest::prelude::*;

const EXES: &[&str] = &[
    "/usr/bin/python3.11",
    "/usr/bin/python",
    "/usr/bin/pypy3",
    "/opt/julia/bin/julia",
    "/usr/lib/R/bin/exec/R",
    "/usr/bin/Rscript",
    "/usr/bin/bash",
    "/usr/bin/dash",
    "/usr/bin/perl",
    "/usr/bin/ruby3.1",
    "/home/u/bin/solver",
    "",
];

fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        // Options and option clusters the parsers treat specially, and their neighbours.
        prop::sample::select(vec![
            "-", "--", "-c", "-m", "-mmpi4py", "mpi4py", "-W", "-X", "-uB", "-e", "-E", "-f",
            "--file=", "--args", "-o", "+o", "-I", "-le", "--rc", "--eval", "-t", "-s", "-Ic",
        ])
        .prop_map(String::from),
        "[-+./a-zA-Z0-9=é]{0,12}",
        any::<String>(),
    ]
}

proptest! {
    #[test]
    fn never_panics_and_names_something(
        exe in prop::sample::select(EXES),
        argv in prop::collection::vec(arg(), 0..8),
        cwd in prop_oneof![Just(String::new()), "/[a-z/.]{0,12}", any::<String>()],
    ) {
        let app = classify(exe, &argv, &cwd);
        match &app.interpreter {
            Some(interpreter) => {
                prop_assert_eq!(interpreter.as_str(), exe);
                prop_assert!(!app.name.is_empty());
            }
            None => prop_assert_eq!(app.name.as_str(), exe),
        }
    }
}
