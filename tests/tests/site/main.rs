//! The site side with real parts: ingest and digest, the weekly mail (HTML in Chromium, real
//! SMTP servers and Postfix), the admin pages, `mpistat serve` and its `/metrics`, the store.
//!
//! One test binary (cargo finds `tests/site/main.rs`), one module per file beside it: a test's
//! name is `<file>::<test>` (`cargo test --release -p mpistat-e2e --test site -- <file>::`).

mod backends;
mod concurrent_ingest;
mod ingest_digest;
mod mail_html;
mod mail_transports;
mod metrics;
mod postgresql;
mod read_only;
mod serve;
mod site_report;
mod store;
