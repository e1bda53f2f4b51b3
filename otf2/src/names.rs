//! How the analysis model's names and roles appear in OTF2, both ways.

use crate::ffi;
use mpistat_trace::model::{MpiClass, RegionRole};

/// OTF2's "undefined" values (macros of casts, which bindgen does not carry over).
pub(crate) const UNDEFINED_U32: u32 = u32::MAX;
pub(crate) const UNDEFINED_U64: u64 = u64::MAX;

/// A region's OTF2 role and paradigm.
pub(crate) fn role_and_paradigm(role: RegionRole) -> (ffi::OTF2_RegionRole, ffi::OTF2_Paradigm) {
    let mpi = ffi::OTF2_PARADIGM_MPI as ffi::OTF2_Paradigm;
    let role_code = match role {
        RegionRole::User => {
            return (
                ffi::OTF2_REGION_ROLE_FUNCTION as ffi::OTF2_RegionRole,
                ffi::OTF2_PARADIGM_USER as ffi::OTF2_Paradigm,
            )
        }
        RegionRole::Mpi(MpiClass::PointToPoint) => ffi::OTF2_REGION_ROLE_POINT2POINT,
        RegionRole::Mpi(MpiClass::Barrier) => ffi::OTF2_REGION_ROLE_BARRIER,
        RegionRole::Mpi(MpiClass::AllToAll) => ffi::OTF2_REGION_ROLE_COLL_ALL2ALL,
        RegionRole::Mpi(MpiClass::OneToAll) => ffi::OTF2_REGION_ROLE_COLL_ONE2ALL,
        RegionRole::Mpi(MpiClass::AllToOne) => ffi::OTF2_REGION_ROLE_COLL_ALL2ONE,
    };
    (role_code as ffi::OTF2_RegionRole, mpi)
}

/// The analysis's role of an OTF2 region: an MPI routine (by paradigm, or a name `MPI_...` when
/// the writer set no paradigm) is classed by its name, as the profiler classes it; everything
/// else (user functions, OpenMP constructs, ...) is the program's own time.
pub(crate) fn role_of(name: &str, paradigm: ffi::OTF2_Paradigm) -> RegionRole {
    let mpi_by_name = (name.as_bytes().get(..4)).is_some_and(|p| p.eq_ignore_ascii_case(b"mpi_"));
    let unknown = matches!(
        u32::from(paradigm),
        ffi::OTF2_PARADIGM_UNKNOWN | ffi::OTF2_PARADIGM_NONE
    );
    if paradigm == ffi::OTF2_PARADIGM_MPI as ffi::OTF2_Paradigm || (unknown && mpi_by_name) {
        RegionRole::Mpi(MpiClass::of_routine(name))
    } else {
        RegionRole::User
    }
}

/// The routine's base name: `MPI_Ssend`, `PMPI_Ssend` and `mpi_ssend_` are all `ssend`.
fn base(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let base = lower.strip_prefix('p').unwrap_or(&lower);
    let base = base.strip_prefix("mpi_").unwrap_or(base);
    base.trim_end_matches('_').to_string()
}

/// Whether a send in this routine is synchronous (returns only after the receive started).
pub(crate) fn synchronous_send(routine: &str) -> bool {
    matches!(base(routine).as_str(), "ssend" | "issend" | "ssend_init")
}

/// OTF2's collective operation of a collective routine (nonblocking ones as their blocking
/// kin; an unknown one as an all-reduce).
pub(crate) fn collective_op(routine: &str) -> ffi::OTF2_CollectiveOp {
    let op = |base: &str| {
        Some(match base {
            "barrier" => ffi::OTF2_COLLECTIVE_OP_BARRIER,
            "bcast" => ffi::OTF2_COLLECTIVE_OP_BCAST,
            "gather" => ffi::OTF2_COLLECTIVE_OP_GATHER,
            "gatherv" => ffi::OTF2_COLLECTIVE_OP_GATHERV,
            "scatter" => ffi::OTF2_COLLECTIVE_OP_SCATTER,
            "scatterv" => ffi::OTF2_COLLECTIVE_OP_SCATTERV,
            "allgather" => ffi::OTF2_COLLECTIVE_OP_ALLGATHER,
            "allgatherv" => ffi::OTF2_COLLECTIVE_OP_ALLGATHERV,
            "alltoall" => ffi::OTF2_COLLECTIVE_OP_ALLTOALL,
            "alltoallv" => ffi::OTF2_COLLECTIVE_OP_ALLTOALLV,
            "alltoallw" => ffi::OTF2_COLLECTIVE_OP_ALLTOALLW,
            "allreduce" => ffi::OTF2_COLLECTIVE_OP_ALLREDUCE,
            "reduce" => ffi::OTF2_COLLECTIVE_OP_REDUCE,
            "reduce_scatter" => ffi::OTF2_COLLECTIVE_OP_REDUCE_SCATTER,
            "reduce_scatter_block" => ffi::OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK,
            "scan" => ffi::OTF2_COLLECTIVE_OP_SCAN,
            "exscan" => ffi::OTF2_COLLECTIVE_OP_EXSCAN,
            _ => return None,
        })
    };
    let base = base(routine);
    let found = op(&base).or_else(|| base.strip_prefix('i').and_then(op));
    found.unwrap_or(ffi::OTF2_COLLECTIVE_OP_ALLREDUCE) as ffi::OTF2_CollectiveOp
}

/// A call site `file.c:120` as OTF2's source file and line; any other site is the file alone
/// (line 0), so that [`site_of`] gives back exactly the same text.
pub(crate) fn split_site(site: &str) -> (&str, u32) {
    if let Some((file, line)) = site.rsplit_once(':') {
        if let Ok(number) = line.parse::<u32>() {
            if !file.is_empty() && number > 0 && number.to_string() == line {
                return (file, number);
            }
        }
    }
    (site, 0)
}

/// The call site of an OTF2 region's source file and line (see [`split_site`]).
pub(crate) fn site_of(file: &str, line: u32) -> String {
    match line {
        0 => file.to_string(),
        line => format!("{file}:{line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn routines_are_classed_by_name() {
        assert!(synchronous_send("MPI_Ssend"));
        assert!(synchronous_send("mpi_issend_"));
        assert!(!synchronous_send("MPI_Send"));
        assert_eq!(
            collective_op("MPI_Iallreduce"),
            ffi::OTF2_COLLECTIVE_OP_ALLREDUCE as ffi::OTF2_CollectiveOp
        );
        assert_eq!(
            collective_op("PMPI_Bcast"),
            ffi::OTF2_COLLECTIVE_OP_BCAST as ffi::OTF2_CollectiveOp
        );
        assert_eq!(
            role_of("MPI_Reduce", ffi::OTF2_PARADIGM_MPI as ffi::OTF2_Paradigm),
            RegionRole::Mpi(MpiClass::AllToOne)
        );
        assert_eq!(
            role_of(
                "!$omp parallel",
                ffi::OTF2_PARADIGM_OPENMP as ffi::OTF2_Paradigm
            ),
            RegionRole::User
        );
    }

    proptest! {
        #[test]
        fn sites_come_back_as_they_were(site in "[a-z.:0-9]{0,12}") {
            let (file, line) = split_site(&site);
            prop_assert_eq!(site_of(file, line), site);
        }
    }
}
