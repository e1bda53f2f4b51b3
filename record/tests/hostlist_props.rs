//! Property tests of the compressed host list: expanding a compressed list gives the hosts back
//! in order (zero padding kept), and a capped list stays within its length, lists a prefix of
//! the hosts and counts the rest in its marker.

use mpistat_record::hostlist::{compress, expand};
use proptest::prelude::*;

/// Host names like a site's: a few prefixes (some ending in `-` or `.`), numbers with and without
/// zero padding, runs of consecutive numbers, and names without a number.
fn host() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec!["node", "n", "gpu-", "a", "b.", "x1y", ""]);
    prop_oneof![
        4 => (prefix.clone(), 0u64..40, 0usize..4).prop_map(|(p, n, w)| format!("{p}{n:0w$}")),
        1 => "[a-z][a-z.-]{0,6}",
        1 => (prefix, 0u64..u64::MAX / 100).prop_map(|(p, n)| format!("{p}{n}")),
    ]
}

/// Lists with runs: each entry is a host followed by up to 5 hosts numbered after it.
fn hosts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec((host(), 0u64..6), 0..40).prop_map(|runs| {
        let mut out = Vec::new();
        for (h, run) in runs {
            let digits = h.len() - h.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            out.push(h.clone());
            if digits == 0 || digits > 17 {
                continue;
            }
            let (p, d) = h.split_at(h.len() - digits);
            let n: u64 = d.parse().unwrap();
            for k in 1..=run {
                out.push(format!("{p}{:0w$}", n + k, w = digits));
            }
        }
        out
    })
}

proptest! {
    #[test]
    fn expand_undoes_compress(hosts in hosts()) {
        let list = compress(&hosts, usize::MAX);
        let (back, more) = expand(&list).map_err(|e| TestCaseError::fail(format!("{list}: {e}")))?;
        prop_assert_eq!(more, 0);
        prop_assert_eq!(back, hosts, "{}", list);
    }

    #[test]
    fn a_capped_list_is_a_prefix_and_a_count(hosts in hosts(), cap in 12usize..200) {
        let list = compress(&hosts, cap);
        prop_assert!(list.len() <= cap, "{} > {}: {}", list.len(), cap, list);
        let (back, more) = expand(&list).map_err(|e| TestCaseError::fail(format!("{list}: {e}")))?;
        prop_assert_eq!(back.len() as u64 + more, hosts.len() as u64, "{}", list);
        prop_assert_eq!(&back[..], &hosts[..back.len()], "{}", list);
    }
}
