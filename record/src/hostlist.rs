//! Host lists in Slurm's compressed form: `node[001-004,007],gpu3` for `node001` .. `node004`,
//! `node007`, `gpu3`. A record names a job's hosts this way, so that its size does not grow with
//! the number of nodes of a regular allocation; [`compress`] caps what is left (an irregular list)
//! at a length, with a `+N more` marker for the hosts it leaves out.
//!
//! As in Slurm, each range inside brackets keeps the width of its first number (`[08-10]` is
//! `08`, `09`, `10`; `[9-10]` is `9`, `10`), so zero padding survives a round trip. Hosts keep
//! the order they were given in: [`expand`] of [`compress`] gives the same list back.

/// A name split into a prefix and its trailing decimal number (kept as written, for its width).
fn split_number(host: &str) -> (&str, Option<(&str, u64)>) {
    let digits = host.len() - host.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    // Up to 18 digits fit a u64 with room for the next number.
    if digits == 0 || digits > 18 {
        return (host, None);
    }
    let (prefix, number) = host.split_at(host.len() - digits);
    (prefix, number.parse().ok().map(|n| (number, n)))
}

/// `n` written with at least `width` digits.
fn padded(n: u64, width: usize) -> String {
    format!("{n:0width$}")
}

/// One `lo-hi` range of a bracket: `lo` as written (its width is the range's).
struct Range<'a> {
    lo: &'a str,
    lo_n: u64,
    hi_n: u64,
}

impl Range<'_> {
    fn write(&self, out: &mut String) {
        out.push_str(self.lo);
        if self.hi_n > self.lo_n {
            out.push('-');
            out.push_str(&padded(self.hi_n, self.lo.len()));
        }
    }
}

/// Hosts sharing a prefix, one after another in the list.
struct Group<'a> {
    prefix: &'a str,
    ranges: Vec<Range<'a>>,
}

impl Group<'_> {
    fn write(&self, out: &mut String) {
        out.push_str(self.prefix);
        match self.ranges.as_slice() {
            [] => return,
            [single] if single.hi_n == single.lo_n => {
                out.push_str(single.lo);
                return;
            }
            _ => {}
        }
        out.push('[');
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            r.write(out);
        }
        out.push(']');
    }

    fn hosts(&self) -> usize {
        self.ranges
            .iter()
            .map(|r| (r.hi_n - r.lo_n + 1) as usize)
            .sum()
    }
}

/// Whether a host name can go into a host list as it is (what a host name may hold; the list's
/// own `[`, `]`, `,`, `-` after a bracket, `+` and spaces would make it ambiguous).
pub fn is_plain_host(host: &str) -> bool {
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The hosts in Slurm's compressed form, in the given order, at most `max_len` bytes: if longer,
/// the list stops after the last group that fits and ends with `,+N more` (N hosts not listed).
/// A name that is not a plain host name ([`is_plain_host`]) is counted among those not listed.
pub fn compress<S: AsRef<str>>(hosts: &[S], max_len: usize) -> String {
    let mut groups: Vec<Group> = Vec::new();
    let mut unlisted = 0usize;
    for host in hosts.iter().map(AsRef::as_ref) {
        if !is_plain_host(host) {
            unlisted += 1;
            continue;
        }
        let (prefix, number) = split_number(host);
        let Some((digits, n)) = number else {
            groups.push(Group {
                prefix,
                ranges: Vec::new(),
            });
            continue;
        };
        if let Some(g) = groups
            .last_mut()
            .filter(|g| g.prefix == prefix && !g.ranges.is_empty())
        {
            let last = g.ranges.last_mut().expect("not empty");
            if n == last.hi_n + 1 && padded(n, last.lo.len()) == digits {
                last.hi_n = n;
            } else {
                g.ranges.push(Range {
                    lo: digits,
                    lo_n: n,
                    hi_n: n,
                });
            }
            continue;
        }
        groups.push(Group {
            prefix,
            ranges: vec![Range {
                lo: digits,
                lo_n: n,
                hi_n: n,
            }],
        });
    }
    let hosts_of = |g: &Group| g.hosts().max(1);
    let mut out = String::new();
    let mut listed = 0;
    for g in &groups {
        let mut item = String::new();
        g.write(&mut item);
        let separator = usize::from(!out.is_empty());
        // Room for this group and, if any host would still be left out, the marker.
        let rest = unlisted + groups.iter().map(hosts_of).sum::<usize>() - listed - hosts_of(g);
        let marker = if rest > 0 {
            format!(",+{rest} more").len()
        } else {
            0
        };
        if out.len() + separator + item.len() + marker > max_len {
            break;
        }
        if separator == 1 {
            out.push(',');
        }
        out.push_str(&item);
        listed += hosts_of(g);
    }
    let not_listed = unlisted + groups.iter().map(hosts_of).sum::<usize>() - listed;
    if not_listed > 0 {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&format!("+{not_listed} more"));
    }
    out
}

/// A host list that [`expand`] cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a host list at {at:?}: {why}")]
pub struct BadHostList {
    pub at: String,
    pub why: &'static str,
}

/// The hosts of a compressed list, and how many more its `+N more` marker says were left out.
pub fn expand(list: &str) -> Result<(Vec<String>, u64), BadHostList> {
    let bad = |at: &str, why| BadHostList {
        at: at.to_string(),
        why,
    };
    let mut hosts = Vec::new();
    let mut more = 0;
    let mut rest = list;
    while !rest.is_empty() {
        if let Some(marker) = rest.strip_prefix('+') {
            let n = marker
                .strip_suffix(" more")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| bad(rest, "a marker is `+N more`, at the end"))?;
            more = n;
            break;
        }
        let end = rest.find([',', '[']).unwrap_or(rest.len());
        let prefix = &rest[..end];
        if rest[end..].starts_with('[') {
            let close = rest[end..]
                .find(']')
                .map(|i| end + i)
                .ok_or_else(|| bad(rest, "an unclosed bracket"))?;
            for range in rest[end + 1..close].split(',') {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                let number = |s: &str| {
                    (!s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| s.parse::<u64>().ok())
                        .flatten()
                        .ok_or_else(|| bad(range, "a range is N or N-M"))
                };
                let (lo_n, hi_n) = (number(lo)?, number(hi)?);
                if hi_n < lo_n || hi_n - lo_n > 1_000_000 {
                    return Err(bad(range, "a range goes up, by at most a million"));
                }
                hosts.extend((lo_n..=hi_n).map(|n| format!("{prefix}{}", padded(n, lo.len()))));
            }
            rest = &rest[close + 1..];
        } else {
            if prefix.is_empty() {
                return Err(bad(rest, "an empty host name"));
            }
            hosts.push(prefix.to_string());
            rest = &rest[end..];
        }
        rest = match rest.strip_prefix(',') {
            Some(r) if !r.is_empty() => r,
            None if rest.is_empty() => rest,
            _ => return Err(bad(rest, "hosts are separated by single commas")),
        };
    }
    Ok((hosts, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_forms() {
        let hosts = ["node001", "node002", "node003", "node004", "node007"];
        assert_eq!(compress(&hosts, 1000), "node[001-004,007]");
        assert_eq!(compress(&["a1", "a2", "b3"], 1000), "a[1-2],b3");
        assert_eq!(compress(&["n8", "n9", "n10", "n11"], 1000), "n[8-11]");
        assert_eq!(compress(&["n08", "n09", "n10"], 1000), "n[08-10]");
        assert_eq!(compress(&["n9", "n010"], 1000), "n[9,010]");
        assert_eq!(compress(&["login", "x"], 1000), "login,x");
        assert_eq!(compress(&["nodea", "nodeb"], 1000), "nodea,nodeb");
        assert_eq!(compress::<&str>(&[], 1000), "");
        let (hosts, more) = expand("node[001-004,007],gpu3").unwrap();
        assert_eq!(more, 0);
        assert_eq!(
            hosts,
            ["node001", "node002", "node003", "node004", "node007", "gpu3"]
        );
        assert_eq!(expand("n[9-10]").unwrap().0, ["n9", "n10"]);
    }

    #[test]
    fn capped_with_a_marker() {
        let hosts: Vec<String> = (0..1000).map(|i| format!("h{}x{i}", i % 7)).collect();
        let list = compress(&hosts, 100);
        assert!(list.len() <= 100, "{list}");
        let (listed, more) = expand(&list).unwrap();
        assert_eq!(listed.len() as u64 + more, 1000, "{list}");
        assert_eq!(listed, hosts[..listed.len()]);
        assert_eq!(compress(&hosts, 5), "+1000 more");
        assert_eq!(compress(&["ok1", "bad,name"], 100), "ok1,+1 more");
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in [
            "a[1-", "a[2-1]", "a[x]", "a,,b", "a,", "+x more", "a[1]b", ",",
        ] {
            assert!(expand(bad).is_err(), "{bad:?}");
        }
    }
}
