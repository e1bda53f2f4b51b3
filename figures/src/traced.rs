//! A traced job as the mail's level 6 and the job's page show it: what its trace's analysis
//! found (the summary the analysis record carried), or why there is none.

use mpistat_record::analysis::Summary;

/// A traced job's analysis, for the mail's level-6 section and the job's page.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedJob {
    pub job_id: String,
    /// `JobRecord::application`.
    pub app: String,
    /// The trace directory (the full report: `mpistat analyze DIR`).
    pub dir: String,
    /// The analysis' summary, or why there is none.
    pub summary: Result<Summary, String>,
}

impl TracedJob {
    /// From a stored analysis (a summary that no longer parses is told as such).
    pub fn from_stored(stored: mpistat_store::StoredAnalysis) -> TracedJob {
        let summary = match (&stored.summary, &stored.error) {
            (Some(json), _) => serde_json::from_str(json)
                .map_err(|e| format!("the stored summary is not readable: {e}")),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err("no result".into()),
        };
        TracedJob {
            job_id: stored.job_id,
            app: stored.app,
            dir: stored.dir,
            summary,
        }
    }
}
