//! Replay-based analysis of MPI event traces: wait states, delay costs and the critical path.
//!
//! The crate is pure computation (no IO): it takes a [`mpistat_trace::model::Trace`] (one event list per rank plus
//! global definitions) and returns an [`Analysis`]. The pipeline follows Scalasca's parallel replay:
//!
//! 1. [`timeline`]: per rank, events become MPI operations and time pieces labelled by call path.
//! 2. [`matching`]: messages are matched with MPI's ordering rules, collectives by communicator order.
//! 3. [`forward`]: the forward replay finds wait states (the patterns of [`patterns`]).
//! 4. [`backward`]: the backward replay computes delay costs (Algorithm 1 of Böhme et al., TOPC 2016)
//!    over the message-passing [`replay`] scheduler; [`critical`] follows the critical path backwards
//!    and derives the critical-path indicators.
//!
//! [`distributed`] runs the passes as one process of many (an MPI program: `mpistat-analyze`),
//! each reading only its block of ranks.
//!
//! [`memory`] estimates what an analysis of a trace directory needs from its files' sizes and
//! checks it against the memory a process has (the node's or its cgroup's), so that a trace too
//! big fails clearly, saying how many processes would do, before anything is read.
//!
//! [`source`] is what the passes read a trace through: an mpistat trace directory or, through
//! crate `mpistat-otf2`, an OTF2 archive.
//!
//! The trace it reads (event model, file format, unification of the profiler's per-rank files)
//! is crate `mpistat-trace`. [`builder`] makes synthetic,
//! causally consistent executions for tests and benchmarks, and [`examples`] the executions they
//! share.

pub mod analysis;
pub mod backward;
pub mod blocks;
pub mod builder;
pub mod callpath;
pub mod critical;
pub mod distributed;
pub mod distributed_replay;
pub mod error;
pub mod examples;
pub mod forward;
pub mod matching;
pub mod memory;
pub mod patterns;
pub mod replay;
pub mod source;
pub mod timeline;

pub use analysis::{analyze, Analysis};
pub use error::AnalysisError;
