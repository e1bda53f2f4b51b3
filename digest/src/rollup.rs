//! `mpistat rebuild-rollups`: the rollups themselves are crate `mpistat-figures`' (`rollup`).

/// `mpistat rebuild-rollups`.
pub fn command(args: &crate::site::Paths) -> anyhow::Result<std::process::ExitCode> {
    let (config, db) = crate::site::load_writer(args)?;
    let start = std::time::Instant::now();
    let counted = mpistat_figures::rollup::rebuild(&db, &config.site_report)?;
    db.report_quarantined(&mut std::io::stderr())?;
    eprintln!(
        "rollups rebuilt from {counted} jobs ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(std::process::ExitCode::SUCCESS)
}
