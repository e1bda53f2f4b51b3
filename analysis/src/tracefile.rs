//! Trace files (to come).
