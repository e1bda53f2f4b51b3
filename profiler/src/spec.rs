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

/// One row of the routine table. The name is a range of one string
/// ([`crate::generated::routines::NAMES`]) rather than a `&str`: a table of pointers would be
/// relocated by the loader, i.e. written, in every rank (private memory), a table of offsets
/// stays shared read-only data.
#[derive(Clone, Copy, Debug)]
pub struct Routine {
    pub name_at: u16,
    pub name_len: u8,
    pub class: Class,
}

impl Routine {
    pub fn name(&self) -> &'static str {
        let at = usize::from(self.name_at);
        &crate::generated::routines::NAMES[at..at + usize::from(self.name_len)]
    }
}
