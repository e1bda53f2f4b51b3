//! `cargo run -p mpistat-wrapgen`: regenerates `profiler/src/generated/` and `front/src/generated.rs`
//! from the spec table.
//! `--check`: changes nothing, exits 1 and names the stale files if any.

use anyhow::{bail, Context};
use mpistat_wrapgen::{stale_files, workspace_root, write_files};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = match args.as_slice() {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("usage: mpistat-wrapgen [--check]"),
    };
    let root = workspace_root();
    if check {
        let stale = stale_files(&root).context("checking the generated files")?;
        if stale.is_empty() {
            println!("generated files are up to date");
            return Ok(());
        }
        for path in &stale {
            eprintln!("stale: {path} (run `cargo run -p mpistat-wrapgen`)");
        }
        std::process::exit(1);
    }
    let written = write_files(&root).context("generating the wrappers")?;
    if written.is_empty() {
        println!("generated files were already up to date");
    }
    for path in written {
        println!("wrote {path}");
    }
    Ok(())
}
