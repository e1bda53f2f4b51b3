//! `mpistat ingest`: syslog files into the database, once or following them.
//!
//! Lines are grouped by their sender (the relay that delivered them, if any, and the
//! kernel-attested uid: [`trust`]) and each group reassembled by its own [`Assembler`], so that
//! a record is only ever made of lines one uid sent, that came the way the site trusts (its own
//! syslogd, or on a log host one of its trusted relays), and that uid must be the one the
//! record's index claims (wire version 2 sends the index next to the record; ingest does not
//! inflate the record, and whoever reads it later checks it against the index filed, see
//! [`mpistat_store`]), and the index's user name must be that uid's in the ingest
//! host's password database ([`accounts`]; a uid and name the host knows neither of are
//! believed, and the site may turn the check off). Everything that is not stored as a job is
//! stored as rejected (forged, incomplete, corrupt, ...). Lines are bytes: only our messages,
//! printable ASCII, need to be text.
//!
//! # Crash safety and idempotence
//!
//! Every row has a natural key (a job's key; a rejected line's file and offset), and inserts
//! ignore rows already there, so reading any stretch of input twice changes nothing. Jobs,
//! rejected entries and the read position of every file are written in one transaction every
//! [`BATCH_LINES`] lines and at the end. The position saved for a file is the end of the last
//! line read, or the first line of the oldest job begun in that file that is still waiting for
//! parts, so a rerun (after `kill -9`, or the next timer run) sees that job whole. A job still
//! missing parts at the end of a run is given up and reported incomplete once its grace is
//! over ([`Run::within_grace`]): the lines its relay delivered since are the site's grace
//! period younger than its first line (by the times rsyslog wrote on them, see [`clock`];
//! lines without such a time: once the file has not changed for the grace period); and at
//! any commit, once more than [`REREAD_MAX`] bytes were read after it, so that a run never
//! reads more than that again. If its parts turn up later it is stored and the report is
//! withdrawn.
//!
//! # Memory
//!
//! Each sender's [`Assembler`] holds at most [`mpistat_record::wire::PENDING_JOBS_MAX`]
//! records waiting for parts and [`mpistat_record::wire::PENDING_BYTES_MAX`] bytes of them,
//! and all senders together at most [`PENDING_JOBS_TOTAL_MAX`] and
//! [`PENDING_BYTES_TOTAL_MAX`]; a record given up to stay within them is reported incomplete,
//! saying why. A record beyond the limits of what a record may carry
//! ([`mpistat_record::limits`]) is rejected as `oversized`. Lines are cut at 256 KiB.
//!
//! # Threads
//!
//! The reading thread reads lines (in place, from a large buffer) and reassembles records.
//! Complete jobs are filed on worker threads ([`OrderedPool`], [`FILE_BATCH`] jobs at a time):
//! for wire version 2 only their index is read (no inflating; see [`CompleteJob::indexed`]),
//! version 1 records are decoded. Their outcomes are taken in the order the jobs completed, and
//! all of them before a batch is closed, so a batch holds exactly the jobs whose lines lie
//! before the positions it saves. The batches are committed by a writer thread ([`writer`])
//! while the next one is read (the decoders also count the records in the batch's rollups).
//! A file database is checkpointed (WAL copied into the database file and synced) by a thread
//! of its own, so the writer does not wait for the disk;
//! it waits for the checkpointer only every few commits, so that the WAL starts over. Measured
//! (`bench/ingest.sh`): 1 million records in about 10 s on two cores, where SQLite (the writer,
//! one core) is most of the time.
//!
//! # Analyses
//!
//! Analysis records (`mpistat analyze --send`, sent by the job's user) come in the same lines;
//! one whose attested sender is the uid (and user) it claims is filed in `analysis_inbox`, in
//! the same transaction as the jobs, and matched to its job after the run
//! ([`crate::escalate::after_ingest`]).
//!
//! # Escalation
//!
//! A job that is traced, or meets the site's escalation rule (judged on its index by
//! [`crate::escalate::needs_a_look`]), is queued for [`crate::escalate::after_ingest`] in the
//! transaction that stores it, so looking at the new jobs after a run reads only those few.

/// Why a run of ingest stopped (what it read before is stored: see "Crash safety").
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    #[error(transparent)]
    Figures(#[from] mpistat_figures::Error),
    /// A file could not be read, or what the run reports could not be written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("the database writer stopped")]
    WriterStopped,
}

pub mod accounts;
pub mod clock;
pub mod escalate;
pub mod partials;
pub mod report;
pub mod source;
pub mod trust;
pub mod writer;

use clock::LogClock;
use mpistat_figures::rollup::Rollups;
use mpistat_record::wire::Kind;
use mpistat_record::{AnalysisRecord, Assembler, CompleteJob, Problem};
use mpistat_site::{EscalationConfig, SiteConfig, SiteReportConfig};
use mpistat_store::pool::OrderedPool;
use mpistat_store::{JobRow, Position, Received, Rejected, WriteStore};
use source::{Head, Input, Opened};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use trust::{Relay, Sender};
use writer::Batch;

/// What decoding a complete job gives (the record itself is dropped on the worker, too).
type Outcome = Result<Filed, Problem>;

/// What complete lines were.
enum Filed {
    Job(JobRow),
    /// An analysis record (`mpistat analyze --send`), matched to its job after the run.
    Analysis(AnalysisRecord),
}

/// Lines read between two commits (by default; the first commit of a run comes after an eighth
/// of them, so that the writer starts early). Large: every commit rewrites the pages of the
/// key index it touched, which are all of them when keys are random (hashes).
pub const BATCH_LINES: u64 = 200_000;

/// Complete jobs handed to a decoder thread at a time (one channel message, one wake-up, and
/// one set of rollups to merge: each day's rollup of a set is merged whole, so fewer, larger
/// sets merge less; bench/SCALE.md, "Ingest's CPU a job").
const FILE_BATCH: usize = 256;

/// Records waiting for parts that a run holds over all senders (each sender's assembler holds
/// at most [`mpistat_record::wire::PENDING_JOBS_MAX`]); beyond, the oldest record of the
/// sender holding most bytes is given up (rejected as incomplete).
pub const PENDING_JOBS_TOTAL_MAX: usize = 4096;

/// Bytes of records waiting for parts a run holds over all senders (each sender's at most
/// [`mpistat_record::wire::PENDING_BYTES_MAX`]).
pub const PENDING_BYTES_TOTAL_MAX: usize = 128 << 20;

/// The most of its input a run reads again because a record begun there waits for parts: a
/// record whose first line lies further back is given up (rejected as incomplete), whatever
/// its grace period. A record's parts come in one burst, so no more than a few lines lie
/// between them.
pub const REREAD_MAX: u64 = 16 << 20;

/// What ingest is told to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Logs as rsyslog writes them; their rotated siblings are read too.
    pub files: Vec<PathBuf>,
    /// Reject records without a kernel-attested sender uid (site `ingest.require_attested_uid`).
    pub require_attested_uid: bool,
    /// On a log host: the relays whose attestations are believed (site
    /// `ingest.trusted_relays`, [`trust::Relays`]); empty: this host's own syslogd's.
    pub trusted_relays: Vec<String>,
    /// Whose the login names are: a record whose user name is not its attested uid's here is
    /// rejected as forged ([`trust::forgery`]). The host's password database with site
    /// `ingest.check_user_names` ([`accounts::System`]); `None`: names are not checked.
    pub accounts: Option<Arc<dyn accounts::Accounts>>,
    /// How long a job may wait for missing parts (site `ingest.grace_seconds`).
    pub grace: Duration,
    /// How long a half of a job whose `MPI_Abort` ran on another node than rank 0 is held for
    /// its other half before it is stored alone (site `ingest.partial_grace_seconds`,
    /// [`partials`]).
    pub partial_grace: Duration,
    /// The site's escalation rule: jobs that meet it (or are traced) are queued for it.
    pub escalation: EscalationConfig,
    /// The site's critical-job thresholds (site `[site_report]`), which the rollups' critical
    /// list is made with ([`mpistat_figures::rollup`]).
    pub critical: SiteReportConfig,
    /// Lines read between two commits ([`BATCH_LINES`]; tests make it smaller, for more
    /// commits to kill between).
    pub batch_lines: u64,
}

impl Options {
    /// Reading `files` as the site `config` says, [`BATCH_LINES`] lines per commit.
    pub fn from_site(files: Vec<PathBuf>, config: &SiteConfig) -> Options {
        Options {
            files,
            require_attested_uid: config.ingest.require_attested_uid,
            trusted_relays: config.ingest.trusted_relays.clone(),
            accounts: config
                .ingest
                .check_user_names
                .then(|| Arc::new(accounts::System::default()) as Arc<dyn accounts::Accounts>),
            grace: Duration::from_secs(config.ingest.grace_seconds),
            partial_grace: Duration::from_secs(config.ingest.partial_grace_seconds),
            escalation: config.escalation.clone(),
            critical: config.site_report.clone(),
            batch_lines: BATCH_LINES,
        }
    }
}

/// What one run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunStats {
    pub files_read: u64,
    pub lines: u64,
    /// Records decoded and accepted (new or already stored).
    pub records: u64,
    /// Of those, stored for the first time.
    pub new_jobs: u64,
    /// Rejected entries found (new or already stored), by kind.
    pub rejected: u64,
    /// Files that could not be read (reported to `err`).
    pub unreadable: u64,
}

/// Where an unfinished job's first line is, and when rsyslog wrote it (when believed, see
/// [`clock`]).
#[derive(Debug, Clone, Copy)]
struct FirstLine {
    file: usize,
    offset: u64,
    time_ms: Option<u64>,
}

/// One sender's assembler and how many lines it was given.
#[derive(Default)]
struct SenderLines {
    assembler: Assembler,
    pushed: u64,
}

/// A file read in this run.
struct FileRead {
    input: Input,
    /// Its path as rejected entries and stored jobs name it.
    source: Arc<str>,
    position: Position,
    /// Where this run began reading it.
    read_from: u64,
    /// End of the last line read.
    read_to: u64,
    /// Stat when it was read to the end.
    stat_at_end: Option<String>,
}

/// Work of one run not yet handed to the writer.
struct Pending {
    jobs: Vec<JobRow>,
    /// The rollups of the jobs whose records were read ([`JobRow::counted`]), made by the
    /// decoders (which drop the records) and added up here.
    rollups: Rollups,
    /// Some job counted in `rollups` was rejected here (not a sender's own): the writer makes
    /// them again from the jobs' records.
    recount: bool,
    analyses: Vec<Received>,
    rejected: Vec<Rejected>,
    lines: u64,
}

impl Pending {
    fn new(critical: &SiteReportConfig) -> Pending {
        Pending {
            jobs: Vec::new(),
            rollups: Rollups::new(critical),
            recount: false,
            analyses: Vec::new(),
            rejected: Vec::new(),
            lines: 0,
        }
    }
}

struct Run<'a> {
    /// Batches to commit, to the writer thread.
    writer: SyncSender<Batch>,
    /// The writer thread stopped (on an error, which `run_once` reports).
    writer_stopped: bool,
    /// Lines in the next batch.
    batch_lines: u64,
    options: &'a Options,
    /// The accounts of [`Options::accounts`], each uid and name looked up once per run.
    accounts: Option<accounts::Known>,
    known: HashMap<Head, Position>,
    /// Who delivered and sent each line.
    relays: trust::Relays,
    /// The latest time rsyslog wrote on an attested line of the ways the site trusts (for the
    /// ingest lag of the metrics).
    newest_line_ms: Option<u64>,
    senders: HashMap<Sender, SenderLines>,
    /// Records waiting for parts and their bytes, over all senders' assemblers.
    pending_jobs: usize,
    pending_bytes: usize,
    /// First line of every job that was unfinished when last looked at, by sender and arrival.
    first_lines: HashMap<(Sender, u64), FirstLine>,
    /// How far each relay's lines have gone on (by the times rsyslog wrote on them).
    clocks: HashMap<Relay, LogClock>,
    files: Vec<FileRead>,
    /// Complete jobs being filed on other threads, [`FILE_BATCH`] at a time (with the
    /// thresholds of the rollups they are counted in).
    decoders: OrderedPool<(Vec<CompleteJob>, Arc<SiteReportConfig>), Filing>,
    /// The site's critical-job thresholds ([`Options::critical`]), for the decoders.
    critical: Arc<SiteReportConfig>,
    /// Complete jobs not handed to the decoders yet.
    batch: Vec<CompleteJob>,
    /// Sender and file of every job handed to the decoders whose outcome is not taken yet.
    decoding: VecDeque<(Sender, usize)>,
    pending: Pending,
    stats: RunStats,
}

/// Batches waiting for the writer (each holds up to [`BATCH_LINES`] lines' jobs).
const WRITER_QUEUE: usize = 1;

/// SQLite's page cache for the ingest connection during a run, in KiB: room for the pages a
/// batch adds before its commit (about 75 MB for the 200,000 lines of a full batch) and for
/// the index leaves every batch touches again (the newest of each user's, each application's
/// in `jobs_by_user` and `jobs_by_app`: 64 KiB a user and an application, 380 MB at 2,000
/// users and 4,000 applications, from about 2 M jobs on), which otherwise spill into the WAL
/// before the commit and are read back. With 32 MiB the first spilled: the same bytes, but
/// 1 M jobs took 9.2-10.0 s instead of 8.4-8.9; 512 instead of 128 MiB made no difference
/// measurable at 1 M jobs on a loaded machine (18.3 vs 18.4 s of CPU a 200,000-job part).
/// Allocated as used; the batch's records are not held (the decoders count them in the
/// rollups and drop them), which left room for it.
const INGEST_CACHE_KIB: i64 = 524_288;

/// Read every file of `options` from where the last run stopped and store what is new.
pub fn run_once(
    db: &mut WriteStore,
    options: &Options,
    err: &mut impl Write,
) -> Result<RunStats, crate::Error> {
    let known = db
        .positions()?
        .into_iter()
        .map(|p| {
            let head = Head {
                len: p.head_len,
                crc: p.head_crc,
            };
            (head, p)
        })
        .collect();
    let incomplete = db.incomplete_keys()?;
    // A file database is checkpointed by a thread of its own while the writer goes on.
    let checkpointer = db.start_bulk(INGEST_CACHE_KIB)?;
    let own_checkpoints = checkpointer.is_some();
    let writer_db = &mut *db;
    let stats = std::thread::scope(|scope| {
        let (requests, commits) = mpsc::sync_channel(1);
        let (done, dones) = mpsc::channel();
        if let Some(checkpointer) = checkpointer {
            scope.spawn(move || checkpointer.run(commits, done));
        }
        let committed = own_checkpoints.then(|| writer::Checkpoints::new(requests, dones));
        let (batches, inbox) = mpsc::sync_channel(WRITER_QUEUE);
        let writer = scope.spawn(move || {
            writer::write(
                writer_db,
                inbox,
                incomplete,
                committed,
                &options.critical,
                options.partial_grace,
            )
        });
        // Reading and the decoders it starts run at the writer's priority: they also count the
        // records in the rollups, and a lower one left the writer waiting for them on a loaded
        // machine (600,000 jobs into a 1M month at load 5-6: 107 s at niceness +5, 79 s at +0).
        let reader = scope.spawn(move || {
            let mut run = Run {
                writer: batches,
                writer_stopped: false,
                batch_lines: (options.batch_lines / 8).max(1),
                options,
                accounts: options.accounts.clone().map(accounts::Known::new),
                known,
                relays: trust::Relays::new(options.trusted_relays.clone()),
                newest_line_ms: None,
                senders: HashMap::new(),
                pending_jobs: 0,
                pending_bytes: 0,
                first_lines: HashMap::new(),
                clocks: HashMap::new(),
                files: Vec::new(),
                decoders: OrderedPool::new(file_jobs),
                critical: Arc::new(options.critical.clone()),
                batch: Vec::with_capacity(FILE_BATCH),
                decoding: VecDeque::new(),
                pending: Pending::new(&options.critical),
                stats: RunStats::default(),
            };
            let mut unreadable = Vec::new();
            for file in &options.files {
                for input in source::inputs_for(file) {
                    if let Err(e) = run.read(input.clone()) {
                        if run.writer_stopped {
                            return (Err(e), unreadable);
                        }
                        unreadable.push(format!("cannot read {}: {e}", input.path.display()));
                        run.stats.unreadable += 1;
                    }
                }
            }
            (run.finish(), unreadable)
        });
        let (read, unreadable) = reader.join().expect("the reader panicked");
        // The reader closed the channel, which ends the writer (when it has committed it all).
        let written = writer.join().expect("the database writer panicked");
        for message in unreadable {
            writeln!(err, "mpistat: {message}")?;
        }
        match (read, written) {
            (_, Err(e)) | (Err(e), _) => Err(e),
            // The writer's rejections were read as records.
            (Ok(stats), Ok(written)) => Ok(RunStats {
                new_jobs: written.new_jobs,
                records: stats.records - written.rejected,
                rejected: stats.rejected + written.rejected,
                ..stats
            }),
        }
    });
    db.end_bulk()?;
    stats
}

impl Run<'_> {
    fn read(&mut self, input: Input) -> Result<(), crate::Error> {
        let stat = source::stat_of(&input.path)?;
        if self.known.values().any(|p| p.stat.as_ref() == Some(&stat)) {
            return Ok(()); // read to its end before and unchanged since
        }
        let Some(head) = source::open(&input)?.map(|opened| opened.head) else {
            return Ok(());
        };
        let position = self.known.get(&head).cloned().unwrap_or(Position {
            id: 0,
            head_len: head.len,
            head_crc: head.crc,
            offset: 0,
            stat: None,
        });
        let Some(mut opened) = source::open_at(&input, position.offset)? else {
            return Ok(());
        };
        self.stats.files_read += 1;
        let file = self.files.len();
        self.files.push(FileRead {
            source: input.path.display().to_string().into(),
            input: input.clone(),
            read_from: opened.offset(),
            read_to: opened.offset(),
            position,
            stat_at_end: None,
        });
        let result = self.read_lines(file, &mut opened);
        self.files[file].read_to = opened.offset();
        result?;
        // The stat may have changed while reading; only the one taken before counts as "read".
        self.files[file].stat_at_end = Some(stat);
        Ok(())
    }

    fn read_lines(&mut self, file: usize, opened: &mut Opened) -> Result<(), crate::Error> {
        let take_unfinished = !self.files[file].input.live;
        while let Some((offset, line)) = opened.next_line(take_unfinished)? {
            self.push_line(file, offset, line);
            if self.pending.lines >= self.batch_lines {
                self.files[file].read_to = opened.offset();
                let waiting = self.give_up_overdue(false);
                self.commit(&waiting)?;
            }
        }
        Ok(())
    }

    fn push_line(&mut self, file: usize, offset: u64, line: &[u8]) {
        self.pending.lines += 1;
        self.stats.lines += 1;
        let sender = self.relays.sender(line);
        // Only rsyslog's own times count, on lines of the ways the site's records come.
        let time_ms = match sender.relay {
            Relay::Local | Relay::Trusted(_) => clock::line_time(line),
            Relay::Untrusted(_) | Relay::Unrelayed(_) => None,
        };
        if let Some(time_ms) = time_ms {
            self.clocks
                .entry(sender.relay.clone())
                .or_default()
                .saw(time_ms);
            if clock::shows_ingest_lag(&sender, self.relays.required()) {
                self.newest_line_ms = self.newest_line_ms.max(Some(time_ms));
            }
        }
        let lines = self.senders.entry(sender.clone()).or_default();
        let held_before = (
            lines.assembler.pending_jobs(),
            lines.assembler.pending_bytes(),
        );
        lines.assembler.push(line);
        lines.pushed += 1;
        if lines.assembler.began_a_job() {
            let first = FirstLine {
                file,
                offset,
                time_ms,
            };
            self.first_lines
                .insert((sender.clone(), lines.pushed), first);
        }
        self.count_held(&sender, held_before);
        self.take_assembled(&sender, file, Some((offset, line)));
        self.keep_within_total_limits(file);
        if self.batch.len() >= FILE_BATCH {
            self.send_batch();
            self.take_decoded(false);
        }
    }

    /// Count what `sender`'s assembler holds now, which held `before` (records, bytes).
    fn count_held(&mut self, sender: &Sender, before: (usize, usize)) {
        let assembler = &self.senders[sender].assembler;
        self.pending_jobs = self.pending_jobs + assembler.pending_jobs() - before.0;
        self.pending_bytes = self.pending_bytes + assembler.pending_bytes() - before.1;
    }

    /// Problems and complete jobs of `sender`'s assembler: the problems as rejected entries
    /// (line-level ones of the line just pushed, `line`: its offset in `file` and its text),
    /// the jobs queued for the decoders.
    fn take_assembled(&mut self, sender: &Sender, file: usize, line: Option<(u64, &[u8])>) {
        let lines = self.senders.get_mut(sender).expect("a sender with lines");
        let problems = lines.assembler.take_problems();
        let complete = lines.assembler.take_complete();
        for problem in problems {
            let (location, text) = match line {
                Some((offset, text)) => (
                    format!("{}:{offset}", self.files[file].input_id()),
                    Some(String::from_utf8_lossy(text)),
                ),
                None => (String::new(), None),
            };
            let rejected = self.rejected_of(problem, file, location, text.as_deref());
            self.pending.rejected.push(rejected);
        }
        for job in complete {
            self.batch.push(job);
            self.decoding.push_back((sender.clone(), file));
        }
    }

    /// While the records waiting for parts over all senders are more than
    /// [`PENDING_JOBS_TOTAL_MAX`] or hold more than [`PENDING_BYTES_TOTAL_MAX`], give up the
    /// oldest of the sender that holds most bytes (rejected as incomplete).
    fn keep_within_total_limits(&mut self, file: usize) {
        while self.pending_jobs > PENDING_JOBS_TOTAL_MAX
            || self.pending_bytes > PENDING_BYTES_TOTAL_MAX
        {
            let largest = self
                .senders
                .iter()
                .max_by_key(|(_, lines)| lines.assembler.pending_bytes())
                .map(|(sender, _)| sender.clone())
                .expect("records are waiting, so some sender holds them");
            let reason = format!(
                "more than {PENDING_JOBS_TOTAL_MAX} records or {PENDING_BYTES_TOTAL_MAX} bytes \
                 of all senders were waiting for parts, this sender's most"
            );
            let assembler = &mut self.senders.get_mut(&largest).expect("a sender").assembler;
            let before = (assembler.pending_jobs(), assembler.pending_bytes());
            assembler.evict_oldest(&reason);
            self.count_held(&largest, before);
            self.take_assembled(&largest, file, None);
        }
    }

    /// Hand the complete jobs collected so far to the decoders.
    fn send_batch(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(FILE_BATCH));
            self.decoders.send((batch, self.critical.clone()));
        }
    }

    /// Take the decoders' outcomes in order: those ready, or all (`wait`, which first hands
    /// over the jobs not sent yet).
    fn take_decoded(&mut self, wait: bool) {
        if wait {
            self.send_batch();
        }
        while let Some(filing) = self.decoders.next(wait) {
            self.take_filing(filing, |run| {
                run.decoding.pop_front().expect("one entry per job sent")
            });
        }
    }

    /// Take the outcomes of some jobs in order (`place`: the sender and file of the next one)
    /// and the rollups of those counted.
    fn take_filing(&mut self, filing: Filing, mut place: impl FnMut(&mut Self) -> (Sender, usize)) {
        let (outcomes, rollups) = filing;
        for outcome in outcomes {
            let (sender, file) = place(self);
            self.take_outcome(outcome, &sender, file);
        }
        self.pending.rollups.merge(rollups);
    }

    /// Store a decoded job (if its sender may have written it) or reject what did not decode.
    fn take_outcome(&mut self, outcome: Outcome, sender: &Sender, file: usize) {
        match outcome {
            Ok(Filed::Job(job)) => self.accept(job, sender, file),
            Ok(Filed::Analysis(analysis)) => self.accept_analysis(analysis, sender, file),
            Err(problem) => {
                let rejected = self.rejected_of(problem, file, String::new(), None);
                self.pending.rejected.push(rejected);
            }
        }
    }

    /// What a sender must have done for its records to be believed.
    fn trust_policy(&self) -> trust::Policy {
        trust::Policy {
            relays_required: self.relays.required(),
            require_attested_uid: self.options.require_attested_uid,
        }
    }

    /// Store `job` if `sender` may have written it, else reject it as forged: it must have come
    /// the way the site trusts (its own syslogd, or a trusted relay), its uid must be the
    /// attested sender's and its user name that uid's ([`trust::forgery`]). The uid and
    /// name checked are the index's, which a wire version 2 record carries next to the record
    /// itself: readers of the stored record check the record says the same (see
    /// [`mpistat_store::FiledJob`]).
    fn accept(&mut self, mut job: JobRow, sender: &Sender, file: usize) {
        let index = &job.index;
        let claims = trust::Claims {
            uid: index.uid,
            user: &index.user,
            host: &index.host,
        };
        let forged = trust::forgery(sender, claims, self.trust_policy(), self.accounts.as_mut())
            .map(|forgery| {
                let reference = format!("{}/{}", job.wire_key(), forgery.suffix);
                ("forged", reference, forgery.detail)
            });
        // SQLite integers are signed: larger figures cannot be stored (no real job has them).
        let too_large = [
            index.start_unix_ms,
            index.end_unix_ms,
            index.wall_ns_sum,
            index.wall_ns_max,
            index.mpi_ns_sum,
        ]
        .into_iter()
        .chain(
            index
                .imbalance
                .iter()
                .flat_map(|i| [i.critical_path_ns, i.work_sum_ns]),
        )
        .any(|n| i64::try_from(n).is_err());
        let rejected = forged.or_else(|| {
            too_large.then(|| {
                (
                    "corrupt",
                    job.wire_key(),
                    "a time or sum is beyond 2^63 (cannot be stored)".to_string(),
                )
            })
        });
        match rejected {
            Some((kind, reference, detail)) => {
                // Counted in the rollups of its decoder's jobs, which must not count it.
                self.pending.recount |= job.counted;
                self.pending.rejected.push(Rejected {
                    kind,
                    reference,
                    source: self.files[file].input.path.display().to_string(),
                    detail: format!("job {}: {detail}", index.job_id),
                    line: None,
                })
            }
            // Its sender's, but its record is not usable (a wrapped or damaged record): rejected
            // now, while it is decoded anyway, rather than stored and counted nowhere.
            None if job.unusable.is_some() => {
                let problem = job.unusable.take().expect("checked");
                let mut rejected = self.rejected_of(*problem, file, String::new(), None);
                rejected.detail = format!(
                    "job {} filed for uid {} ({}): {}",
                    job.index.job_id, job.index.uid, job.index.user, rejected.detail
                );
                self.pending.rejected.push(rejected);
            }
            None => {
                self.stats.records += 1;
                job.look = crate::escalate::needs_a_look(&self.options.escalation, &job.index);
                job.meets_rule = crate::escalate::meets_rule(&self.options.escalation, &job.index);
                job.origin = sender.origin();
                job.source = self.files[file].source.clone();
                self.pending.jobs.push(job);
            }
        }
    }

    /// File `analysis` if `sender` may have sent it (the uid and user name it claims are the
    /// sender's, as for a job: [`trust::forgery`]), else reject it as forged. Whether it is its
    /// job's (same uid, traced) is judged after the run, when the job is surely stored.
    fn accept_analysis(&mut self, analysis: AnalysisRecord, sender: &Sender, file: usize) {
        let key = analysis.key();
        let source = self.files[file].input.path.display().to_string();
        let claims = trust::Claims {
            uid: analysis.uid,
            user: &analysis.user,
            host: &analysis.host,
        };
        let forged = trust::forgery(sender, claims, self.trust_policy(), self.accounts.as_mut());
        if let Some(forgery) = forged {
            self.pending.rejected.push(Rejected {
                kind: "forged",
                reference: format!("{key}/{}", forgery.suffix),
                source,
                detail: format!("analysis of job {}: {}", analysis.job_key, forgery.detail),
                line: None,
            });
            return;
        }
        let received_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // SQLite integers are signed.
        let analysis = AnalysisRecord {
            analysed_unix_ms: analysis.analysed_unix_ms.min(i64::MAX as u64),
            ..analysis
        };
        self.pending.analyses.push(Received {
            key,
            analysis,
            received_ms,
            source,
            looked_to: 0,
        });
    }

    /// A decoder problem as a rejected entry: job-level ones are referenced by the job's key,
    /// line-level ones by `location` (`<file id>:<offset>`) and keep the line.
    fn rejected_of(
        &self,
        problem: Problem,
        file: usize,
        location: String,
        line: Option<&str>,
    ) -> Rejected {
        // Line-level problems start with the decoder's line count; the reference has the offset.
        let detail = match &problem {
            Problem::DuplicatePart { at, .. }
            | Problem::ConflictingPart { at, .. }
            | Problem::CorruptLine { at, .. }
            | Problem::UnsupportedWireVersion { at, .. } => {
                problem.to_string().replacen(&format!("{at}: "), "", 1)
            }
            _ => problem.to_string(),
        };
        let (kind, reference, line) = match &problem {
            Problem::MissingParts { key, .. } | Problem::Evicted { key, .. } => {
                ("incomplete", key.clone(), None)
            }
            Problem::Oversized { key, .. } => ("oversized", key.clone(), None),
            Problem::DuplicatePart { .. } => ("duplicate", location, line),
            Problem::ConflictingPart { .. } => ("conflicting", location, line),
            Problem::CorruptLine { .. } => ("corrupt", location, line),
            Problem::UnsupportedWireVersion { .. } => ("unsupported", location, line),
            Problem::ChecksumMismatch { key }
            | Problem::BadPayload { key, .. }
            | Problem::IndexMismatch { key, .. } => ("corrupt", key.clone(), None),
            Problem::UnsupportedModelVersion { key, .. } => ("unsupported", key.clone(), None),
        };
        Rejected {
            kind,
            reference,
            source: self.files[file].input.path.display().to_string(),
            detail,
            line: line.map(|l| l.trim_end().to_string()),
        }
    }

    /// The jobs still waiting for parts, by sender, with their first lines (forgetting those
    /// that finished). Every job's first line is kept ([`Run::push_line`]).
    fn unfinished_first_lines(&mut self) -> Vec<(Sender, String, Option<FirstLine>)> {
        let mut unfinished = Vec::new();
        let mut still = HashSet::new();
        for (sender, lines) in &self.senders {
            for (key, arrival) in lines.assembler.pending_first_lines() {
                still.insert((sender.clone(), arrival));
                let first = self.first_lines.get(&(sender.clone(), arrival)).copied();
                unfinished.push((sender.clone(), key.to_string(), first));
            }
        }
        self.first_lines.retain(|k, _| still.contains(k));
        unfinished
    }

    /// Give up the jobs waiting for parts whose grace is over ([`Run::within_grace`]; while
    /// reading goes on, not `at_end`, only those more than [`REREAD_MAX`] bytes back: the
    /// others' parts may still come in this run): rejected as incomplete (one that misses only
    /// its summary is filed). Returns the others (key and first line), which the next commit
    /// keeps the read position at.
    fn give_up_overdue(&mut self, at_end: bool) -> Vec<(String, FirstLine)> {
        let mut waiting = Vec::new();
        for (sender, key, first) in self.unfinished_first_lines() {
            let waits = |first: &FirstLine| match at_end {
                true => self.within_grace(&sender, first),
                false => self.read_after(first) <= REREAD_MAX,
            };
            let file = match first {
                Some(first) if waits(&first) => {
                    waiting.push((key, first));
                    continue;
                }
                Some(first) => first.file,
                None => self.files.len() - 1,
            };
            let assembler = &mut self.senders.get_mut(&sender).expect("a sender").assembler;
            let before = (assembler.pending_jobs(), assembler.pending_bytes());
            assembler.give_up(&key);
            self.count_held(&sender, before);
            self.take_assembled(&sender, file, None);
        }
        waiting
    }

    /// Hand what was found and every file's position to the writer, to be committed in one
    /// transaction; reading resumes at the first line of the earliest `unfinished` job in a
    /// file, else after its last line read.
    fn commit(&mut self, unfinished: &[(String, FirstLine)]) -> Result<(), crate::Error> {
        self.take_decoded(true);
        let pending = std::mem::replace(&mut self.pending, Pending::new(&self.options.critical));
        self.batch_lines = self.options.batch_lines.max(1);
        self.stats.rejected += pending.rejected.len() as u64;
        let mut positions = Vec::with_capacity(self.files.len());
        for (index, file) in self.files.iter_mut().enumerate() {
            let unfinished_from = unfinished
                .iter()
                .filter(|(_, first)| first.file == index)
                .map(|(_, first)| first.offset)
                .min();
            file.position.offset = unfinished_from.unwrap_or(file.read_to);
            file.position.stat = match unfinished_from {
                None => file.stat_at_end.clone(),
                Some(_) => None,
            };
            let path = file.input.path.display().to_string();
            positions.push((index, file.position.clone(), path));
        }
        let batch = Batch {
            jobs: pending.jobs,
            rollups: pending.rollups,
            recount: pending.recount,
            analyses: pending.analyses,
            rejected: pending.rejected,
            positions,
            newest_line_ms: self.newest_line_ms.map(|ms| ms.min(writer::now_ms())),
        };
        // Only fails when the writer stopped on an error, which `run_once` reports.
        self.writer.send(batch).map_err(|_| {
            self.writer_stopped = true;
            crate::Error::WriterStopped
        })
    }

    /// Whether a job of `sender` whose first line is `first` may still get its missing parts.
    /// Not when more than [`REREAD_MAX`] bytes were read after that line; else, when rsyslog
    /// wrote a time on it, while the lines `sender`'s relay delivered since are younger than
    /// the grace period (the log's own clock: a live log that goes on does not keep a record
    /// waiting for ever, and a backlog read late is judged as it was written), and without a
    /// time, while the file is the live log and changed within the grace period.
    fn within_grace(&self, sender: &Sender, first: &FirstLine) -> bool {
        if self.read_after(first) > REREAD_MAX {
            return false;
        }
        let grace_ms = self.options.grace.as_millis() as u64;
        match first.time_ms {
            Some(time_ms) => {
                let clock = self.clocks.get(&sender.relay).copied().unwrap_or_default();
                clock.since(time_ms, clock::now_ms()) < grace_ms
            }
            None => {
                let input = &self.files[first.file].input;
                let changed = std::fs::metadata(&input.path).and_then(|m| m.modified());
                let age = changed.map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
                input.live && age.is_ok_and(|age| age < self.options.grace)
            }
        }
    }

    /// Bytes read in this run after the line `first`: what the next run reads again if it
    /// resumes there.
    fn read_after(&self, first: &FirstLine) -> u64 {
        let later: u64 = self.files[first.file + 1..]
            .iter()
            .map(|file| file.read_to - file.read_from)
            .sum();
        later + self.files[first.file].read_to.saturating_sub(first.offset)
    }

    /// Report jobs still missing parts whose grace period is over, and commit everything.
    fn finish(mut self) -> Result<RunStats, crate::Error> {
        self.take_decoded(true);
        let waiting = self.give_up_overdue(true);
        self.commit(&waiting)?;
        Ok(self.stats)
    }
}

/// A complete job as a row to store, with its record decoded for the rollups; if the record
/// cannot be read or is not the one its index says (wire version 2), by its index alone (see
/// [`CompleteJob::indexed`]) with the problem, for [`Run::accept`] to reject it as forged (the
/// index is not its sender's) or corrupt; an analysis record decoded.
fn file_job(job: CompleteJob, rollups: &mut Rollups) -> Outcome {
    match job.kind() {
        Kind::Job => match job.decode() {
            Ok(decoded) => Ok(Filed::Job({
                rollups.add(&decoded.record);
                JobRow::decoded(decoded)
            })),
            Err(problem) => job
                .indexed()
                .map(move |indexed| Filed::Job(JobRow::unusable(indexed, problem))),
        },
        Kind::Analysis => job.analysis().map(Filed::Analysis),
    }
}

/// The outcomes of some jobs, and the rollups of those whose records were read.
type Filing = (Vec<Outcome>, Rollups);

/// [`file_job`] of each job, on a decoder thread, which counts the records read in the rollups
/// of these jobs (with these thresholds) and drops them there: the memory of a record is
/// freed by the thread that allocated it, and a batch holds no decoded record.
fn file_jobs((jobs, critical): (Vec<CompleteJob>, Arc<SiteReportConfig>)) -> Filing {
    let mut rollups = Rollups::new(&critical);
    let outcomes = jobs
        .into_iter()
        .map(|job| file_job(job, &mut rollups))
        .collect();
    (outcomes, rollups)
}

impl FileRead {
    /// The file's identity as written in references to its lines.
    fn input_id(&self) -> String {
        format!("{:08x}", self.position.head_crc)
    }
}
