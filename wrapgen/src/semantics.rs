//! The semantics column of the spec table: a small language of terms such as
//! `send(count, datatype) peer(dest) comm(comm)` (described in the header of `mpi.spec`), parsed
//! into [`Semantics`] and turned into the [`TrafficPlan`] the wrapper hands to the runtime.

use crate::cdecl::Prototype;

/// Why a semantics column could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SemanticsError {
    #[error("cannot read term `{0}`: expected `name(arguments)` or a bare word")]
    Syntax(String),
    #[error("unknown term `{0}`")]
    UnknownTerm(String),
    #[error("`{term}` takes {expected} argument(s), got {got}")]
    Arity {
        term: String,
        expected: usize,
        got: usize,
    },
    #[error("`{term}`: `{arg}` is not an argument name")]
    NotAName { term: String, arg: String },
    #[error("`{0}` given twice")]
    Repeated(String),
    #[error("unknown family `{0}` (openmpi, mpich)")]
    UnknownFamily(String),
    #[error("unknown hook `{0}` (init, init_thread, finalize, abort)")]
    UnknownHook(String),
    #[error(
        "unknown destination `{0}` (all, root, all_from_root, self_and_higher, higher, neighbours)"
    )]
    UnknownReach(String),
    #[error("inconsistent terms: {0}")]
    Inconsistent(&'static str),
    #[error("`{term}` names `{arg}`, which is not a parameter of the prototype")]
    NoSuchArgument { term: String, arg: String },
    #[error("`{term}` wants {wanted} for `{arg}`, but the prototype declares `{declared}`")]
    WrongArgumentType {
        term: String,
        arg: String,
        wanted: &'static str,
        declared: String,
    },
}

/// A count: an argument or a literal (`send(1, datatype)`, `in_place(sendbuf, 0, recvtype)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    Arg(String),
    Literal(u32),
}

/// COUNT elements of TYPE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub count: Count,
    pub datatype: String,
}

/// `in_place(BUF, COUNT, TYPE)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPlace {
    pub buf: String,
    pub count: Count,
    pub datatype: String,
}

/// `per_rank(COUNTS, TYPE)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerRank {
    pub counts: String,
    pub datatype: String,
}

/// `per_rank_types(COUNTS, TYPES)`: a count and a datatype per destination (`w` collectives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerRankTypes {
    pub counts: String,
    pub datatypes: String,
}

/// `to(...)`: where a collective sends the block(s) its send arguments name (mirrors
/// `crate::spec::Reach` of the profiler; none: its one peer, or nowhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    All,
    Root,
    AllFromRoot,
    SelfAndHigher,
    Higher,
    Neighbours,
}

impl Reach {
    fn parse(word: &str) -> Option<Reach> {
        Some(match word {
            "all" => Reach::All,
            "root" => Reach::Root,
            "all_from_root" => Reach::AllFromRoot,
            "self_and_higher" => Reach::SelfAndHigher,
            "higher" => Reach::Higher,
            "neighbours" => Reach::Neighbours,
            _ => return None,
        })
    }

    /// The profiler's `Reach` variant.
    pub fn rust_variant(self) -> &'static str {
        match self {
            Reach::All => "All",
            Reach::Root => "Root",
            Reach::AllFromRoot => "AllFromRoot",
            Reach::SelfAndHigher => "SelfAndHigher",
            Reach::Higher => "Higher",
            Reach::Neighbours => "Neighbours",
        }
    }

    /// Whether the root's rank decides who sends.
    fn needs_root(self) -> bool {
        matches!(self, Reach::Root | Reach::AllFromRoot)
    }
}

/// The job-level hooks of `crate::hooks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Init,
    InitThread,
    Finalize,
    Abort,
    /// A datatype handle was freed: its address may come back as another type.
    TypeFree,
    /// A communicator handle was freed: its address may come back as another communicator.
    CommFree,
}

/// How a request-completing call (`MPI_Wait*`, `MPI_Test*`) reports its statuses, for tracing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// `completes(COUNT, REQUESTS, STATUS)`: one status, for the one request that completed.
    One {
        count: Count,
        requests: String,
        status: String,
    },
    /// `completes_each(COUNT, REQUESTS, STATUSES)`: a status per request.
    Each {
        count: Count,
        requests: String,
        statuses: String,
    },
    /// `completes_some(COUNT, REQUESTS, INDICES, OUTCOUNT, STATUSES)`: `OUTCOUNT` requests
    /// completed, the k-th is `REQUESTS[INDICES[k]]` with status `STATUSES[k]`.
    Some {
        count: Count,
        requests: String,
        indices: String,
        outcount: String,
        statuses: String,
    },
}

impl Completion {
    pub fn count(&self) -> &Count {
        match self {
            Completion::One { count, .. }
            | Completion::Each { count, .. }
            | Completion::Some { count, .. } => count,
        }
    }

    pub fn requests(&self) -> &str {
        match self {
            Completion::One { requests, .. }
            | Completion::Each { requests, .. }
            | Completion::Some { requests, .. } => requests,
        }
    }
}

/// Whether and how a wrapper is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wrapping {
    #[default]
    Generated,
    /// Written by hand (variadic); still has a routine id.
    Handwritten,
    /// No wrapper, no id.
    Passthrough,
}

/// The parsed semantics column of one row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Semantics {
    pub send: Option<Side>,
    pub recv: Option<Side>,
    pub data: Option<Side>,
    pub status: Option<String>,
    pub peer: Option<String>,
    pub root: Option<String>,
    pub in_place: Option<InPlace>,
    pub per_rank: Option<PerRank>,
    pub per_rank_types: Option<PerRankTypes>,
    /// `to(...)`: the destinations of a collective's blocks.
    pub reach: Option<Reach>,
    pub comm: Option<String>,
    pub hook: Option<Hook>,
    pub wrapping: Wrapping,
    /// A global synchronising collective when its communicator spans `MPI_COMM_WORLD`: the call
    /// ends a superstep of the imbalance estimates (needs comm).
    pub superstep: bool,
    /// One of the routines that most jobs call in their loops: its wrappers are placed together
    /// in the library's code, so a rank keeps few code pages resident.
    pub hot: bool,
    /// The message tag of a send (trace mode only).
    pub tag: Option<String>,
    /// The `MPI_Request *` a nonblocking call fills (trace mode only).
    pub request: Option<String>,
    /// The requests a `MPI_Wait*`/`MPI_Test*` call may complete (trace mode only).
    pub completes: Option<Completion>,
    /// The `MPI_Comm *` a communicator-creating call fills (its members are looked up then).
    pub newcomm: Option<String>,
    /// `posts`: a nonblocking receive, counted when its request (`request`) completes.
    pub posts: bool,
    /// `persistent(REQUEST)`: a persistent request, counted at each start (a receive: at each
    /// completion).
    pub persistent: Option<String>,
    /// `flag(ARG)`: the `int *` flag of a completing test.
    pub flag: Option<String>,
    /// `index(ARG)`: the `int *` index of the request `MPI_Waitany`/`MPI_Testany` completed.
    pub index: Option<String>,
    /// `starts(COUNT, REQUESTS)`: the requests `MPI_Start`/`MPI_Startall` start.
    pub starts: Option<(Count, String)>,
    /// `frees(REQUEST)`: the request `MPI_Request_free` frees.
    pub frees: Option<String>,
    /// The families whose `mpi.h` declares the routine (`families(...)`); `None`: every family.
    pub families: Option<Vec<crate::spec::Family>>,
}

/// What the generated wrapper passes to `rt::leave` (mirrors `traffic::Traffic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrafficPlan {
    None,
    /// A block of `side` (per destination of the routine's reach); `peer: None` is
    /// `traffic::NO_PEER`. With `in_place`, its count and type when `in_place.buf` is
    /// `MPI_IN_PLACE` (an `OwnBlock` if that count is a per-rank array).
    Elements {
        side: Side,
        peer: Option<String>,
        in_place: Option<InPlace>,
    },
    Received {
        side: Side,
        status: String,
    },
    SendReceived {
        send: Side,
        peer: String,
        recv: Side,
        status: String,
    },
    /// With `in_place`, `in_place.count` is the per-rank array used when `in_place.buf` is
    /// `MPI_IN_PLACE`.
    PerRank {
        per_rank: PerRank,
        peer: Option<String>,
        in_place: Option<InPlace>,
    },
    /// A count and a datatype per destination; with `in_place`, `(buf, counts, datatypes)` used
    /// when `buf` is `MPI_IN_PLACE`.
    PerRankTyped {
        per_rank: PerRankTypes,
        in_place: Option<(String, PerRankTypes)>,
    },
}

fn is_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One term of the column: `name(args)`, or a bare `name` (`args` is `None`).
struct Term {
    name: String,
    args: Option<Vec<String>>,
}

/// Splits `a(b, c) d e(f)` into terms.
fn terms(text: &str) -> Result<Vec<Term>, SemanticsError> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '(')
            .unwrap_or(rest.len());
        let name = &rest[..end];
        if !is_name(name) {
            return Err(SemanticsError::Syntax(
                rest.split_whitespace().next().unwrap_or(rest).to_string(),
            ));
        }
        rest = &rest[end..];
        if let Some(after) = rest.strip_prefix('(') {
            let close = after
                .find(')')
                .ok_or_else(|| SemanticsError::Syntax(format!("{name}({after}")))?;
            let inside = &after[..close];
            if inside.contains('(') {
                return Err(SemanticsError::Syntax(format!("{name}({inside})")));
            }
            let args = inside.split(',').map(|a| a.trim().to_string()).collect();
            out.push(Term {
                name: name.to_string(),
                args: Some(args),
            });
            rest = &after[close + 1..];
            if rest.starts_with(|c: char| !c.is_whitespace()) {
                return Err(SemanticsError::Syntax(format!("{name}({inside}){rest}")));
            }
        } else {
            out.push(Term {
                name: name.to_string(),
                args: None,
            });
        }
        rest = rest.trim_start();
    }
    Ok(out)
}

fn name_arg(term: &str, arg: &str) -> Result<String, SemanticsError> {
    if is_name(arg) {
        Ok(arg.to_string())
    } else {
        Err(SemanticsError::NotAName {
            term: term.into(),
            arg: arg.into(),
        })
    }
}

fn count_arg(term: &str, arg: &str) -> Result<Count, SemanticsError> {
    match arg.parse::<u32>() {
        Ok(n) => Ok(Count::Literal(n)),
        Err(_) => name_arg(term, arg).map(Count::Arg),
    }
}

fn set<T>(slot: &mut Option<T>, term: &str, value: T) -> Result<(), SemanticsError> {
    if slot.replace(value).is_some() {
        return Err(SemanticsError::Repeated(term.into()));
    }
    Ok(())
}

impl Semantics {
    /// Parses the semantics column (`-` means nothing to say).
    pub fn parse(text: &str) -> Result<Semantics, SemanticsError> {
        let mut s = Semantics::default();
        if text.trim() == "-" {
            return Ok(s);
        }
        for Term { name: term, args } in terms(text)? {
            let t = term.as_str();
            let arity = |expected: usize| -> Result<&Vec<String>, SemanticsError> {
                match &args {
                    Some(a) if a.len() == expected => Ok(a),
                    Some(a) => Err(SemanticsError::Arity {
                        term: term.clone(),
                        expected,
                        got: a.len(),
                    }),
                    None => Err(SemanticsError::Arity {
                        term: term.clone(),
                        expected,
                        got: 0,
                    }),
                }
            };
            match t {
                "send" | "recv" | "data" => {
                    let a = arity(2)?;
                    let side = Side {
                        count: count_arg(t, &a[0])?,
                        datatype: name_arg(t, &a[1])?,
                    };
                    let slot = match t {
                        "send" => &mut s.send,
                        "recv" => &mut s.recv,
                        _ => &mut s.data,
                    };
                    set(slot, t, side)?;
                }
                "status" | "peer" | "root" | "comm" | "tag" | "request" | "newcomm"
                | "persistent" | "flag" | "index" | "frees" => {
                    let a = name_arg(t, &arity(1)?[0])?;
                    let slot = match t {
                        "status" => &mut s.status,
                        "peer" => &mut s.peer,
                        "root" => &mut s.root,
                        "persistent" => &mut s.persistent,
                        "flag" => &mut s.flag,
                        "index" => &mut s.index,
                        "frees" => &mut s.frees,
                        "tag" => &mut s.tag,
                        "request" => &mut s.request,
                        "newcomm" => &mut s.newcomm,
                        _ => &mut s.comm,
                    };
                    set(slot, t, a)?;
                }
                "completes" | "completes_each" => {
                    let a = arity(3)?;
                    let (count, requests, last) = (
                        count_arg(t, &a[0])?,
                        name_arg(t, &a[1])?,
                        name_arg(t, &a[2])?,
                    );
                    let c = if t == "completes" {
                        Completion::One {
                            count,
                            requests,
                            status: last,
                        }
                    } else {
                        Completion::Each {
                            count,
                            requests,
                            statuses: last,
                        }
                    };
                    set(&mut s.completes, "completes", c)?;
                }
                "completes_some" => {
                    let a = arity(5)?;
                    let c = Completion::Some {
                        count: count_arg(t, &a[0])?,
                        requests: name_arg(t, &a[1])?,
                        indices: name_arg(t, &a[2])?,
                        outcount: name_arg(t, &a[3])?,
                        statuses: name_arg(t, &a[4])?,
                    };
                    set(&mut s.completes, "completes", c)?;
                }
                "in_place" => {
                    let a = arity(3)?;
                    let ip = InPlace {
                        buf: name_arg(t, &a[0])?,
                        count: count_arg(t, &a[1])?,
                        datatype: name_arg(t, &a[2])?,
                    };
                    set(&mut s.in_place, t, ip)?;
                }
                "to" => {
                    let a = arity(1)?;
                    let reach = Reach::parse(&a[0])
                        .ok_or_else(|| SemanticsError::UnknownReach(a[0].clone()))?;
                    set(&mut s.reach, t, reach)?;
                }
                "starts" => {
                    let a = arity(2)?;
                    let starts = (count_arg(t, &a[0])?, name_arg(t, &a[1])?);
                    set(&mut s.starts, t, starts)?;
                }
                "per_rank_types" => {
                    let a = arity(2)?;
                    let types = PerRankTypes {
                        counts: name_arg(t, &a[0])?,
                        datatypes: name_arg(t, &a[1])?,
                    };
                    set(&mut s.per_rank_types, t, types)?;
                }
                "per_rank" => {
                    let a = arity(2)?;
                    set(
                        &mut s.per_rank,
                        t,
                        PerRank {
                            counts: name_arg(t, &a[0])?,
                            datatype: name_arg(t, &a[1])?,
                        },
                    )?;
                }
                "families" => {
                    let Some(names) = &args else {
                        return Err(SemanticsError::Arity {
                            term,
                            expected: 1,
                            got: 0,
                        });
                    };
                    let families = names
                        .iter()
                        .map(|n| {
                            crate::spec::Family::parse(n)
                                .ok_or_else(|| SemanticsError::UnknownFamily(n.clone()))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    set(&mut s.families, t, families)?;
                }
                "hook" => {
                    let hook = match arity(1)?[0].as_str() {
                        "init" => Hook::Init,
                        "init_thread" => Hook::InitThread,
                        "finalize" => Hook::Finalize,
                        "abort" => Hook::Abort,
                        "type_free" => Hook::TypeFree,
                        "comm_free" => Hook::CommFree,
                        other => return Err(SemanticsError::UnknownHook(other.into())),
                    };
                    set(&mut s.hook, t, hook)?;
                }
                "superstep" | "hot" | "posts" => {
                    if args.is_some() {
                        return Err(SemanticsError::Arity {
                            term,
                            expected: 0,
                            got: 1,
                        });
                    }
                    let flag = match t {
                        "hot" => &mut s.hot,
                        "posts" => &mut s.posts,
                        _ => &mut s.superstep,
                    };
                    if *flag {
                        return Err(SemanticsError::Repeated(term));
                    }
                    *flag = true;
                }
                "handwritten" | "passthrough" => {
                    if args.is_some() {
                        return Err(SemanticsError::Arity {
                            term,
                            expected: 0,
                            got: 1,
                        });
                    }
                    if s.wrapping != Wrapping::Generated {
                        return Err(SemanticsError::Inconsistent(
                            "handwritten and passthrough exclude each other",
                        ));
                    }
                    s.wrapping = if t == "handwritten" {
                        Wrapping::Handwritten
                    } else {
                        Wrapping::Passthrough
                    };
                }
                _ => return Err(SemanticsError::UnknownTerm(term)),
            }
        }
        s.traffic()?;
        Ok(s)
    }

    /// The traffic description for the wrapper, or why the terms do not fit together.
    pub fn traffic(&self) -> Result<TrafficPlan, SemanticsError> {
        use SemanticsError::Inconsistent;
        let sides = [&self.send, &self.recv, &self.data]
            .iter()
            .filter(|s| s.is_some())
            .count();
        let per_destination = self.per_rank.is_some() || self.per_rank_types.is_some();
        if self.wrapping != Wrapping::Generated
            && (sides > 0 || per_destination || self.hook.is_some() || self.after_count() > 0)
        {
            return Err(Inconsistent(
                "a routine without a generated wrapper has no traffic, hook or later work",
            ));
        }
        if self.superstep && (self.comm.is_none() || self.wrapping != Wrapping::Generated) {
            return Err(Inconsistent("superstep needs comm and a generated wrapper"));
        }
        if self.data.is_some() && sides > 1 {
            return Err(Inconsistent("data excludes send and recv"));
        }
        if per_destination
            && (sides > 0 || (self.per_rank.is_some() && self.per_rank_types.is_some()))
        {
            return Err(Inconsistent(
                "per_rank and per_rank_types exclude each other and send, recv and data",
            ));
        }
        if self.status.is_some() && self.recv.is_none() {
            return Err(Inconsistent("status needs recv"));
        }
        if self.in_place.is_some() && (self.status.is_some() || (sides != 1 && !per_destination)) {
            return Err(Inconsistent(
                "in_place needs exactly one side (or per_rank) and no status",
            ));
        }
        if self.peer.is_some() && self.root.is_some() {
            return Err(Inconsistent("peer and root exclude each other"));
        }
        match self.reach {
            Some(_) if self.comm.is_none() => return Err(Inconsistent("to needs comm")),
            Some(_) if self.send.is_none() && !per_destination => {
                return Err(Inconsistent("to needs send, per_rank or per_rank_types"))
            }
            Some(r) if r.needs_root() != self.root.is_some() => {
                return Err(Inconsistent(
                    "to(root) and to(all_from_root) need root, others not",
                ))
            }
            None if per_destination => {
                return Err(Inconsistent("per_rank and per_rank_types need to"))
            }
            _ => {}
        }
        if self.after_count() > 1 {
            return Err(Inconsistent(
                "posts, persistent, completes, starts, frees and newcomm exclude each other",
            ));
        }
        if self.posts && (self.recv.is_none() || self.status.is_some() || self.request.is_none()) {
            return Err(Inconsistent("posts needs recv and request, and no status"));
        }
        if self.persistent.is_some() && (sides == 0 && !per_destination || self.status.is_some()) {
            return Err(Inconsistent("persistent needs traffic, and no status"));
        }
        if (self.flag.is_some() || self.index.is_some()) && self.completes.is_none() {
            return Err(Inconsistent("flag and index need completes"));
        }
        let peer = self.peer.clone().or_else(|| self.root.clone());
        let plan = if let Some(per_rank) = &self.per_rank {
            let in_place = self.in_place.clone();
            if in_place
                .as_ref()
                .is_some_and(|ip| matches!(ip.count, Count::Literal(_)))
            {
                return Err(Inconsistent(
                    "per_rank's in_place count is a per-rank array",
                ));
            }
            TrafficPlan::PerRank {
                per_rank: per_rank.clone(),
                peer,
                in_place,
            }
        } else if let Some(types) = &self.per_rank_types {
            let in_place = match &self.in_place {
                None => None,
                Some(InPlace {
                    buf,
                    count: Count::Arg(counts),
                    datatype,
                }) => Some((
                    buf.clone(),
                    PerRankTypes {
                        counts: counts.clone(),
                        datatypes: datatype.clone(),
                    },
                )),
                Some(_) => {
                    return Err(Inconsistent("per_rank_types's in_place names arrays"));
                }
            };
            TrafficPlan::PerRankTyped {
                per_rank: types.clone(),
                in_place,
            }
        } else if let (Some(send), Some(recv)) = (&self.send, &self.recv) {
            let status = self
                .status
                .clone()
                .ok_or(Inconsistent("send+recv needs status"))?;
            let peer = self
                .peer
                .clone()
                .ok_or(Inconsistent("send+recv needs peer"))?;
            TrafficPlan::SendReceived {
                send: send.clone(),
                peer,
                recv: recv.clone(),
                status,
            }
        } else if let Some(side) = self
            .send
            .as_ref()
            .or(self.recv.as_ref())
            .or(self.data.as_ref())
        {
            match &self.status {
                Some(status) => TrafficPlan::Received {
                    side: side.clone(),
                    status: status.clone(),
                },
                None => TrafficPlan::Elements {
                    side: side.clone(),
                    peer,
                    in_place: self.in_place.clone(),
                },
            }
        } else {
            if self.in_place.is_some() {
                return Err(Inconsistent("in_place without a side"));
            }
            TrafficPlan::None
        };
        Ok(plan)
    }

    /// How many terms ask for work after the call besides the traffic (at most one may).
    fn after_count(&self) -> usize {
        [
            self.posts,
            self.persistent.is_some(),
            self.completes.is_some(),
            self.starts.is_some(),
            self.frees.is_some(),
            self.newcomm.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }

    /// Every argument the terms name, with the term that names it and the C type it must have.
    fn named_arguments(&self) -> Vec<(&'static str, String, ArgKind)> {
        let mut out = Vec::new();
        for (term, side) in [
            ("send", &self.send),
            ("recv", &self.recv),
            ("data", &self.data),
        ] {
            if let Some(s) = side {
                if let Count::Arg(c) = &s.count {
                    out.push((term, c.clone(), ArgKind::Count));
                }
                out.push((term, s.datatype.clone(), ArgKind::Datatype));
            }
        }
        for (term, arg, kind) in [
            ("status", &self.status, ArgKind::Status),
            ("peer", &self.peer, ArgKind::Int),
            ("root", &self.root, ArgKind::Int),
            ("comm", &self.comm, ArgKind::Comm),
            ("persistent", &self.persistent, ArgKind::Requests),
            ("flag", &self.flag, ArgKind::IntOut),
            ("index", &self.index, ArgKind::IntOut),
            ("frees", &self.frees, ArgKind::Requests),
        ] {
            if let Some(a) = arg {
                out.push((term, a.clone(), kind));
            }
        }
        if let Some(ip) = &self.in_place {
            out.push(("in_place", ip.buf.clone(), ArgKind::Buffer));
            let typed = self.per_rank_types.is_some();
            if let Count::Arg(c) = &ip.count {
                let kind = if self.per_rank.is_some() || typed {
                    ArgKind::Counts
                } else {
                    ArgKind::CountOrCounts
                };
                out.push(("in_place", c.clone(), kind));
            }
            let kind = if typed {
                ArgKind::Datatypes
            } else {
                ArgKind::Datatype
            };
            out.push(("in_place", ip.datatype.clone(), kind));
        }
        if let Some(pr) = &self.per_rank {
            out.push(("per_rank", pr.counts.clone(), ArgKind::Counts));
            out.push(("per_rank", pr.datatype.clone(), ArgKind::Datatype));
        }
        if let Some(pr) = &self.per_rank_types {
            out.push(("per_rank_types", pr.counts.clone(), ArgKind::Counts));
            out.push(("per_rank_types", pr.datatypes.clone(), ArgKind::Datatypes));
        }
        if let Some((count, requests)) = &self.starts {
            if let Count::Arg(n) = count {
                out.push(("starts", n.clone(), ArgKind::Int));
            }
            out.push(("starts", requests.clone(), ArgKind::Requests));
        }
        for (term, arg, kind) in [
            ("tag", &self.tag, ArgKind::Int),
            ("request", &self.request, ArgKind::Requests),
            ("newcomm", &self.newcomm, ArgKind::CommOut),
        ] {
            if let Some(a) = arg {
                out.push((term, a.clone(), kind));
            }
        }
        if let Some(c) = &self.completes {
            if let Count::Arg(n) = c.count() {
                out.push(("completes", n.clone(), ArgKind::Int));
            }
            out.push(("completes", c.requests().to_string(), ArgKind::Requests));
            match c {
                Completion::One { status, .. } => {
                    out.push(("completes", status.clone(), ArgKind::Status))
                }
                Completion::Each { statuses, .. } => {
                    out.push(("completes", statuses.clone(), ArgKind::Statuses))
                }
                Completion::Some {
                    indices,
                    outcount,
                    statuses,
                    ..
                } => {
                    out.push(("completes", indices.clone(), ArgKind::IntOut));
                    out.push(("completes", outcount.clone(), ArgKind::IntOut));
                    out.push(("completes", statuses.clone(), ArgKind::Statuses));
                }
            }
        }
        out
    }

    /// Checks that every argument the terms name exists in `proto` with a fitting C type.
    pub fn check_arguments(&self, proto: &Prototype) -> Vec<SemanticsError> {
        let mut problems = Vec::new();
        for (term, arg, kind) in self.named_arguments() {
            let Some(param) = proto.param(&arg) else {
                problems.push(SemanticsError::NoSuchArgument {
                    term: term.into(),
                    arg,
                });
                continue;
            };
            let ty = &param.ty;
            let fits = match kind {
                ArgKind::Int => ty.is_int(),
                ArgKind::Count => ty.is_int() || ty.is_value_of("MPI_Count"),
                ArgKind::Datatype => ty.is_value_of("MPI_Datatype"),
                ArgKind::Datatypes => ty.base == "MPI_Datatype" && ty.indirections() == 1,
                ArgKind::CountOrCounts => {
                    ty.is_int()
                        || ty.is_value_of("MPI_Count")
                        || ((ty.base == "int" || ty.base == "MPI_Count") && ty.indirections() == 1)
                }
                ArgKind::Comm => ty.is_value_of("MPI_Comm"),
                ArgKind::Status => {
                    ty.base == "MPI_Status"
                        && ty.pointers == 1
                        && !ty.is_const
                        && ty.arrays.is_empty()
                }
                ArgKind::Buffer => ty.base == "void" && ty.indirections() == 1,
                ArgKind::Counts => {
                    (ty.base == "int" || ty.base == "MPI_Count") && ty.indirections() == 1
                }
                ArgKind::IntOut => ty.base == "int" && ty.indirections() == 1 && !ty.is_const,
                ArgKind::Requests => ty.base == "MPI_Request" && ty.indirections() == 1,
                ArgKind::Statuses => {
                    ty.base == "MPI_Status" && ty.indirections() == 1 && !ty.is_const
                }
                ArgKind::CommOut => {
                    ty.base == "MPI_Comm" && ty.pointers == 1 && ty.arrays.is_empty()
                }
            };
            if !fits {
                problems.push(SemanticsError::WrongArgumentType {
                    term: term.into(),
                    arg,
                    wanted: kind.describe(),
                    declared: ty.to_string(),
                });
            }
        }
        if self.hook == Some(Hook::InitThread)
            && proto
                .param("provided")
                .is_none_or(|p| p.ty.to_string() != "int *")
        {
            problems.push(SemanticsError::NoSuchArgument {
                term: "hook".into(),
                arg: "provided".into(),
            });
        }
        if matches!(self.hook, Some(Hook::Init | Hook::InitThread))
            && proto
                .param("argc")
                .is_none_or(|p| p.ty.to_string() != "int *")
        {
            problems.push(SemanticsError::NoSuchArgument {
                term: "hook".into(),
                arg: "argc".into(),
            });
        }
        if self.hook == Some(Hook::Abort) && proto.param("errorcode").is_none_or(|p| !p.ty.is_int())
        {
            problems.push(SemanticsError::NoSuchArgument {
                term: "hook".into(),
                arg: "errorcode".into(),
            });
        }
        problems
    }
}

/// The C type an argument named by a term must have.
#[derive(Debug, Clone, Copy)]
enum ArgKind {
    Int,
    /// An element count: `int`, or `MPI_Count` in the large-count (`_c`) routines.
    Count,
    /// An in-place count that may be a per-rank array (its own entry: `MPI_Allgatherv`).
    CountOrCounts,
    Datatype,
    Datatypes,
    Comm,
    Status,
    Buffer,
    Counts,
    IntOut,
    Requests,
    Statuses,
    CommOut,
}

impl ArgKind {
    fn describe(self) -> &'static str {
        match self {
            ArgKind::Int => "`int`",
            ArgKind::Count => "`int` or `MPI_Count`",
            ArgKind::CountOrCounts => "`int` or `MPI_Count`, or an array of them",
            ArgKind::Datatype => "`MPI_Datatype`",
            ArgKind::Datatypes => "an `MPI_Datatype` array",
            ArgKind::Comm => "`MPI_Comm`",
            ArgKind::Status => "`MPI_Status *`",
            ArgKind::Buffer => "a buffer pointer",
            ArgKind::Counts => "an `int` or `MPI_Count` array",
            ArgKind::IntOut => "an `int *`",
            ArgKind::Requests => "an `MPI_Request` pointer or array",
            ArgKind::Statuses => "an `MPI_Status` pointer or array",
            ArgKind::CommOut => "`MPI_Comm *`",
        }
    }
}
