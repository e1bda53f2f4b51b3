//! The events mpistat knows by name and one thread's perf_event group that reads them (crate
//! `perf-event2`: maintained, reads a whole group with one read(2), and exposes the mmap page's
//! user-space `rdpmc` read that the original `perf-event` crate lacks). Events the machine lacks
//! (no PMU: ENOENT) are left out with their reason; a group with nothing opened is not kept.

use super::split::{Backend, Semantics};

/// The events mpistat knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Hardware(perf_event::events::Hardware),
    Software(perf_event::events::Software),
    LlcReadMisses,
    /// A CPU-specific event: perf's raw `config` (event select | unit mask << 8 on x86).
    Raw(u64),
    /// Known name without a portable event on this architecture.
    Unknown(&'static str),
}

/// Intel family-6 models numbered after Broadwell's first (0x3D) without `FP_ARITH_INST_RETIRED`:
/// Haswell parts, Atom cores (Silvermont to Tremont) and Xeon Phi.
const NO_FP_ARITH: [u32; 19] = [
    0x3f, 0x45, 0x46, 0x4c, 0x4d, 0x57, 0x5a, 0x5c, 0x5d, 0x5f, 0x65, 0x6e, 0x75, 0x7a, 0x85, 0x86,
    0x8a, 0x96, 0x9c,
];

/// The processor, as far as choosing raw events goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub vendor: Vendor,
    pub family: u32,
    pub model: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    Amd,
    Other,
}

impl Cpu {
    /// This machine's processor (from `cpuid`); `None` off x86-64.
    pub fn this() -> Option<Cpu> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            // SAFETY: cpuid leaves 0 and 1 exist on every x86-64 processor (the intrinsic is
            // safe in newer Rust, unsafe in the oldest we support).
            #[allow(unused_unsafe)]
            let (l0, l1) = unsafe { (__cpuid(0), __cpuid(1)) };
            let vendor = match (l0.ebx, l0.edx, l0.ecx) {
                // "GenuineIntel", "AuthenticAMD" as the three registers hold them.
                (0x756e_6547, 0x4965_6e69, 0x6c65_746e) => Vendor::Intel,
                (0x6874_7541, 0x6974_6e65, 0x444d_4163) => Vendor::Amd,
                _ => Vendor::Other,
            };
            let base_family = (l1.eax >> 8) & 0xf;
            let family = if base_family == 0xf {
                base_family + ((l1.eax >> 20) & 0xff)
            } else {
                base_family
            };
            let model = if base_family == 0x6 || base_family == 0xf {
                ((l1.eax >> 12) & 0xf0) | ((l1.eax >> 4) & 0xf)
            } else {
                (l1.eax >> 4) & 0xf
            };
            Some(Cpu {
                vendor,
                family,
                model,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// The raw event that counts floating-point work on this processor, where we know one:
    /// Intel Broadwell and later big cores, `FP_ARITH_INST_RETIRED` with every width (event
    /// 0xC7, unit mask 0xFF: FP arithmetic *instructions*, a packed one counting once); AMD Zen
    /// 1-3, `FpRetSseAvxOps` (event 0x03, unit mask 0xFF: FLOPs).
    pub fn fp_event(&self) -> Option<u64> {
        match (self.vendor, self.family) {
            (Vendor::Intel, 6) if self.model >= 0x3d && !NO_FP_ARITH.contains(&self.model) => {
                Some(0xc7 | 0xff << 8)
            }
            (Vendor::Amd, 0x17) => Some(0x03 | 0xff << 8),
            (Vendor::Amd, 0x19) if self.model < 0x10 => Some(0x03 | 0xff << 8),
            _ => None,
        }
    }
}

pub fn event_kind(name: &str) -> Option<EventKind> {
    use perf_event::events::{Hardware as H, Software as S};
    Some(match name {
        "instructions" => EventKind::Hardware(H::INSTRUCTIONS),
        "cycles" => EventKind::Hardware(H::CPU_CYCLES),
        "branch-misses" => EventKind::Hardware(H::BRANCH_MISSES),
        "llc-misses" => EventKind::LlcReadMisses,
        "fp-ops" => match Cpu::this().and_then(|cpu| cpu.fp_event()) {
            Some(config) => EventKind::Raw(config),
            None => {
                EventKind::Unknown("no raw floating-point event is known for this CPU; left out")
            }
        },
        "l2-misses" => EventKind::Unknown("no portable L2-miss event; use llc-misses"),
        "task-clock" => EventKind::Software(S::TASK_CLOCK),
        "page-faults" => EventKind::Software(S::PAGE_FAULTS),
        "context-switches" => EventKind::Software(S::CONTEXT_SWITCHES),
        "cpu-migrations" => EventKind::Software(S::CPU_MIGRATIONS),
        _ => return None,
    })
}

/// One thread's perf_event group (read semantics).
pub struct PerfGroup {
    group: perf_event::Group,
    /// Opened members in event order; `None` for events that could not be opened.
    members: Vec<Option<Member>>,
    /// Every opened member can be read in user space (`rdpmc` through its mmap page).
    pub user_read: bool,
}

/// An opened event: a plain counter, or (hardware events, when all opened members are) one
/// with its mmap page for the user-space read.
enum Member {
    Counter(perf_event::Counter),
    Mapped(perf_event::Sampler),
}

impl Member {
    fn counter(&self) -> &perf_event::Counter {
        match self {
            Member::Counter(c) => c,
            Member::Mapped(s) => s,
        }
    }
}

fn reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT: the kernel offers no such event here (no PMU)".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("{e} (kernel.perf_event_paranoid forbids it)")
        }
        _ => e.to_string(),
    }
}

impl PerfGroup {
    /// Open `events` for the calling thread; the reasons of the ones that failed (by index).
    pub fn open(events: &[EventKind]) -> Result<(PerfGroup, Vec<Option<String>>), String> {
        use perf_event::events::{Cache, CacheId, CacheOp, CacheResult};
        let mut group = perf_event::Group::new().map_err(|e| reason(&e))?;
        let mut members = Vec::new();
        let mut problems = Vec::new();
        for kind in events {
            let built = match *kind {
                EventKind::Hardware(h) => group.add(&perf_event::Builder::new(h)),
                EventKind::Software(s) => group.add(&perf_event::Builder::new(s)),
                EventKind::Raw(config) => group.add(&perf_event::Builder::new(
                    perf_event::events::Raw::new(config),
                )),
                EventKind::LlcReadMisses => group.add(&perf_event::Builder::new(Cache {
                    which: CacheId::LL,
                    operation: CacheOp::READ,
                    result: CacheResult::MISS,
                })),
                EventKind::Unknown(why) => {
                    members.push(None);
                    problems.push(Some(why.to_string()));
                    continue;
                }
            };
            match built {
                Ok(c) => {
                    members.push(Some(Member::Counter(c)));
                    problems.push(None);
                }
                Err(e) => {
                    members.push(None);
                    problems.push(Some(reason(&e)));
                }
            }
        }
        let hardware_only = events
            .iter()
            .zip(&members)
            .all(|(k, m)| m.is_none() || !matches!(k, EventKind::Software(_)));
        if hardware_only {
            // Give each counter its mmap page (the kernel's page only, no sample buffer).
            for (member, problem) in members.iter_mut().zip(problems.iter_mut()) {
                if let Some(Member::Counter(counter)) = member.take() {
                    match counter.sampled(0) {
                        Ok(mapped) => *member = Some(Member::Mapped(mapped)),
                        Err(e) => *problem = Some(format!("cannot map its page: {}", reason(&e))),
                    }
                }
            }
        }
        if members.iter().all(Option::is_none) {
            // Dropping the group closes its leader too: an idle leader left open still costs the
            // kernel work at every context switch of the thread (x1.4 on an oversubscribed
            // collective), and nothing would ever be read from it.
            let why = problems.iter().flatten().next().cloned();
            return Err(why.unwrap_or_else(|| "no event could be opened".into()));
        }
        group.enable().map_err(|e| reason(&e))?;
        let mut group = PerfGroup {
            group,
            members,
            user_read: false,
        };
        group.user_read = group.members.iter().flatten().all(|m| match m {
            Member::Mapped(s) => s.read_user().count().is_some(),
            Member::Counter(_) => false,
        }) && group.members.iter().any(Option::is_some);
        Ok((group, problems))
    }

    /// Every opened member read in user space; `false` if one is not on a hardware counter just
    /// now (e.g. multiplexed out), when the caller reads the group with read(2) instead.
    fn read_user(&self, out: &mut [u64]) -> bool {
        for (o, m) in out.iter_mut().zip(&self.members) {
            *o = match m {
                None => 0,
                Some(Member::Mapped(s)) => match s.read_user().count() {
                    Some(v) => v,
                    None => return false,
                },
                Some(Member::Counter(_)) => return false,
            };
        }
        true
    }
}

impl Backend for PerfGroup {
    fn semantics(&self) -> Semantics {
        Semantics::Read
    }

    fn read(&mut self, out: &mut [u64]) -> bool {
        if self.user_read && self.read_user(out) {
            return true;
        }
        let Ok(data) = self.group.read() else {
            return false;
        };
        for (o, m) in out.iter_mut().zip(&self.members) {
            *o = m
                .as_ref()
                .and_then(|m| data.get(m.counter()))
                .map_or(0, |v| v.value());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floating_point_events_are_known_for_recent_intel_and_amd_processors() {
        let cpu = |vendor, family, model| Cpu {
            vendor,
            family,
            model,
        };
        // Skylake-SP, Ice Lake-SP: FP_ARITH_INST_RETIRED.ALL-widths.
        assert_eq!(cpu(Vendor::Intel, 6, 0x55).fp_event(), Some(0xffc7));
        assert_eq!(cpu(Vendor::Intel, 6, 0x6a).fp_event(), Some(0xffc7));
        // Haswell has no such event.
        assert_eq!(cpu(Vendor::Intel, 6, 0x3f).fp_event(), None);
        // Zen 2 (EPYC Rome), Zen 3 (Milan): FpRetSseAvxOps.
        assert_eq!(cpu(Vendor::Amd, 0x17, 0x31).fp_event(), Some(0xff03));
        assert_eq!(cpu(Vendor::Amd, 0x19, 0x01).fp_event(), Some(0xff03));
        assert_eq!(cpu(Vendor::Amd, 0x19, 0x11).fp_event(), None);
        assert_eq!(cpu(Vendor::Other, 6, 0x55).fp_event(), None);
    }

    #[test]
    fn this_processor_is_recognised() {
        if cfg!(target_arch = "x86_64") {
            let cpu = Cpu::this().expect("cpuid works");
            assert!(cpu.family > 0, "{cpu:?}");
        }
    }

    #[test]
    fn software_events_open_and_hardware_ones_say_why_not() {
        let kinds = [
            event_kind("task-clock").unwrap(),
            event_kind("instructions").unwrap(),
        ];
        let Ok((mut g, problems)) = PerfGroup::open(&kinds) else {
            return; // perf_event_open forbidden here altogether: nothing to check
        };
        assert_eq!(problems[0], None);
        let mut v = [0u64; 2];
        assert!(g.read(&mut v));
        // Hardware events either work or carry a reason.
        assert!(problems[1].is_some() || v[1] > 0);
        // A software event has no user-space read: the group is read with read(2).
        assert!(!g.user_read);
    }

    #[test]
    fn a_group_with_no_event_opened_is_not_kept_and_says_why() {
        let kinds = [
            EventKind::Unknown("not opened"),
            EventKind::Unknown("unknown event name"),
        ];
        match PerfGroup::open(&kinds) {
            Ok(_) => panic!("a group of no events was kept open"),
            Err(why) => assert!(
                why == "not opened" || why.contains("perf"),
                "unexpected reason: {why}"
            ),
        }
    }

    #[test]
    fn hardware_only_groups_are_read_in_user_space_where_the_kernel_allows() {
        let kinds = [
            event_kind("instructions").unwrap(),
            event_kind("cycles").unwrap(),
        ];
        // No PMU (this machine: ENOENT) or perf forbidden: nothing opened, no group kept.
        let Ok((mut g, problems)) = PerfGroup::open(&kinds) else {
            return;
        };
        let (mut a, mut b) = ([0u64; 2], [0u64; 2]);
        assert!(g.read(&mut a));
        std::hint::black_box((0..100_000u64).sum::<u64>());
        assert!(g.read(&mut b));
        let opened = problems.iter().position(Option::is_none).unwrap();
        assert!(
            b[opened] > a[opened],
            "counter did not advance: {a:?} {b:?}"
        );
    }
}
