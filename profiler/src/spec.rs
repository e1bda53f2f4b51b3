//! Types of the generated routine table (see `generated/routines.rs`, made from `spec/mpi.spec`).

/// The class of an MPI routine, as in the spec table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    P2p,
    Collective,
    OneSided,
    Io,
    Datatype,
    Comm,
    Topology,
    Misc,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::P2p => "p2p",
            Class::Collective => "collective",
            Class::OneSided => "one-sided",
            Class::Io => "io",
            Class::Datatype => "datatype",
            Class::Comm => "comm",
            Class::Topology => "topology",
            Class::Misc => "misc",
        }
    }
}

/// Where a call sends the data its arguments describe (spec term `to`): how many times its block
/// counts, as bytes are "what is sent" for every routine (docs/counting.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Its one peer, or nowhere (point-to-point, one-sided, I/O, local calls): the block once.
    Once,
    /// Every member of the communicator (of an intercommunicator's remote group), itself
    /// included; with `MPI_IN_PLACE` every other member.
    All,
    /// The root (itself at the root; with `MPI_IN_PLACE` nothing); at an intercommunicator's
    /// root (`MPI_ROOT`) and its non-participants (`MPI_PROC_NULL`) nothing.
    Root,
    /// Only the root sends, to every member (itself included; with `MPI_IN_PLACE` every other
    /// member); at an intercommunicator the root (`MPI_ROOT`) to the remote group.
    AllFromRoot,
    /// Itself and every higher rank (`MPI_Scan`; with `MPI_IN_PLACE` every higher rank).
    SelfAndHigher,
    /// Every higher rank (`MPI_Exscan`).
    Higher,
    /// Every out-neighbour of the communicator's topology that is a process (a Cartesian
    /// topology's `MPI_PROC_NULL` beyond a non-periodic edge is sent nothing).
    Neighbours,
}

/// One row of the routine table. The name is a range of one string
/// ([`crate::generated::routines::NAMES`]) rather than a `&str`: a table of pointers would be
/// relocated by the loader, i.e. written, in every rank (private memory), a table of offsets
/// stays shared read-only data.
#[derive(Clone, Copy, Debug)]
pub struct Routine {
    pub name_at: u16,
    pub name_len: u8,
    pub class: Class,
    pub reach: Reach,
}

impl Routine {
    pub fn name(&self) -> &'static str {
        let at = usize::from(self.name_at);
        let name = &crate::generated::routines::NAMES[at..at + usize::from(self.name_len)];
        // SAFETY: wrapgen writes NAMES from the spec table's names and asserts they are ASCII;
        // every name's range lies between two names, so the slice is ASCII too.
        unsafe { std::str::from_utf8_unchecked(name) }
    }
}
