//! The site's trace directory pattern made a path: read by the writer (the job's directory) and
//! the spill (its root), which the writer uses: a module of its own keeps them out of a circle.

/// The site's trace directory pattern with `~` (at its start) and `$HOME` the user's home.
pub(super) fn expand_home(pattern: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let expanded = match pattern.strip_prefix('~') {
        Some(rest) => format!("{home}{rest}"),
        None => pattern.to_string(),
    };
    expanded.replace("$HOME", &home)
}
