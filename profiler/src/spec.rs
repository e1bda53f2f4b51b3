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

/// One row of the routine table.
#[derive(Clone, Copy, Debug)]
pub struct Routine {
    pub name: &'static str,
    pub class: Class,
}
