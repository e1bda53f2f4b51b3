//! The shipped Grafana dashboard's queries (`etc/grafana/mpistat.json`), for the tests that check
//! them against `/metrics` (pages/tests/metrics.rs) and a real Prometheus (tests/tests/site/metrics.rs).

use std::path::Path;

/// The dashboard as shipped.
pub fn path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../etc/grafana/mpistat.json")
}

/// Every `expr` of the dashboard's panels, as written (with Grafana's `$window`).
pub fn exprs() -> Vec<String> {
    let text = std::fs::read_to_string(path()).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("expr", serde_json::Value::String(expr)) => out.push(expr.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut exprs = Vec::new();
    walk(&dashboard, &mut exprs);
    exprs
}

/// The series an expression names: its `mpistat_` identifiers (the dashboard uses no others).
pub fn series_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("mpistat_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}
