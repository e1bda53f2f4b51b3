//! Jobs across several nodes, emulated on this machine: Open MPI starts a daemon per host name
//! through `tests/bin/node-rsh` (its own UTS namespace), and the ranks talk TCP over loopback.
//! The record counts the nodes, names rank 0's, and keeps exact calls and bytes.

use mpistat_e2e::*;

fn check_basic_on(nodes: &[(&str, u32)]) {
    let syslogd = Syslogd::start();
    let job = Job::on_nodes(program("basic.c"), nodes);
    let ranks = nodes.iter().map(|(_, n)| n).sum();
    let profiled = run_compared(&job, &syslogd);
    assert_every_rank_printed(&profiled, ranks, basic_ok_line);
    let record = syslogd.single_record();
    assert_eq!(record.ranks, ranks);
    assert_eq!(record.nodes as usize, nodes.len(), "{record:#?}");
    assert_eq!(record.host, nodes[0].0, "rank 0's host");
    assert_routines(&record, &basic_expectations(ranks));
    assert_no_other_routines(&record, &basic_expectations(ranks), LIFECYCLE);
}

#[test]
fn two_nodes_two_ranks_each() {
    let _serial = serial();
    check_basic_on(&[("nodea", 2), ("nodeb", 2)]);
}

#[test]
fn three_nodes_of_different_sizes() {
    let _serial = serial();
    check_basic_on(&[("nodea", 1), ("nodeb", 2), ("nodec", 1)]);
}
