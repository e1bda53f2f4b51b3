pub fn command(_a: &crate::cli::ServeArgs) -> anyhow::Result<std::process::ExitCode> { todo!() }
