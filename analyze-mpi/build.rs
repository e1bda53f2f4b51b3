//! Compiles `src/shim.c` with the MPI compiler wrapper (`MPISTAT_MPICC`, else `mpicc` for
//! `mpistat-analyze-mpi` and `mpicc.mpich` for `mpistat-analyze-mpi-mpich`, whose manifest is in
//! `mpich/`) and links the program against that MPI library, with the library directories the
//! wrapper names (Open MPI: `--showme:link`, MPICH: `-link_info`).

use std::process::Command;

fn words_of(program: &str, args: &[&str]) -> Option<Vec<String>> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    })
}

fn main() {
    println!("cargo:rerun-if-env-changed=MPISTAT_MPICC");
    let mpich = std::env::var("CARGO_PKG_NAME").as_deref() == Ok("mpistat-analyze-mpi-mpich");
    let sources = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let sources = if mpich {
        sources.parent().unwrap().join("src")
    } else {
        sources.join("src")
    };
    let default = if mpich { "mpicc.mpich" } else { "mpicc" };
    let mpicc = std::env::var("MPISTAT_MPICC").unwrap_or_else(|_| default.into());
    let link = words_of(&mpicc, &["--showme:link"])
        .or_else(|| words_of(&mpicc, &["-link_info"]))
        .unwrap_or_else(|| {
            panic!(
                "mpistat-analyze needs an MPI compiler wrapper: `{mpicc} --showme:link` and \
                 `{mpicc} -link_info` failed. Install libopenmpi-dev or libmpich-dev (Debian) or \
                 set MPISTAT_MPICC."
            )
        });
    println!(
        "cargo:rerun-if-changed={}",
        sources.join("shim.c").display()
    );
    cc::Build::new()
        .compiler(&mpicc)
        .file(sources.join("shim.c"))
        .compile("mpistat_mpi_shim");
    for word in link {
        if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        } else if let Some(lib) = word.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}
