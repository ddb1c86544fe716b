//! Hardware and software counters of watched processes through perf_event_open(2), one
//! counter per thread (inherited by threads and children created later), summed at the end.
//! An event the kernel cannot count here is reported as such, never as zero.

use std::io;

use crate::stats::CounterValue;

/// perf_event_attr, as of PERF_ATTR_SIZE_VER5 (112 bytes); later fields stay zero.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_RAW: u32 = 4;
/// attr.flags bits: inherit (bit 1) and exclude_hv (bit 6).
const FLAG_INHERIT: u64 = 1 << 1;
/// perf_event_open flags: close the counter on exec.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// A counter that was asked for, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfEvent {
    pub name: String,
    kind: u32,
    config: u64,
}

impl std::str::FromStr for PerfEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<PerfEvent, String> {
        let (kind, config) = match s {
            "cycles" | "cpu-cycles" => (PERF_TYPE_HARDWARE, 0),
            "instructions" => (PERF_TYPE_HARDWARE, 1),
            "cache-misses" => (PERF_TYPE_HARDWARE, 3),
            "branches" | "branch-instructions" => (PERF_TYPE_HARDWARE, 4),
            "branch-misses" => (PERF_TYPE_HARDWARE, 5),
            "task-clock" => (PERF_TYPE_SOFTWARE, 1),
            "page-faults" => (PERF_TYPE_SOFTWARE, 2),
            "context-switches" => (PERF_TYPE_SOFTWARE, 3),
            "cpu-migrations" => (PERF_TYPE_SOFTWARE, 4),
            raw if raw.starts_with('r') && raw.len() > 1 => (
                PERF_TYPE_RAW,
                u64::from_str_radix(&raw[1..], 16)
                    .map_err(|_| format!("invalid raw event {raw:?}; use e.g. r6e"))?,
            ),
            other => {
                return Err(format!(
                    "unknown perf event {other:?}; use instructions, cycles, branches, branch-misses, cache-misses, task-clock, context-switches, page-faults, cpu-migrations or rHEX"
                ))
            }
        };
        Ok(PerfEvent {
            name: s.to_string(),
            kind,
            config,
        })
    }
}

/// Open counters on every thread of the given processes.
pub struct Counters {
    /// Per event: its open descriptors, or why none could be opened.
    events: Vec<(PerfEvent, Result<Vec<i32>, String>)>,
}

fn open_counter(event: &PerfEvent, tid: u32) -> io::Result<i32> {
    let attr = PerfEventAttr {
        kind: event.kind,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: event.config,
        flags: FLAG_INHERIT | FLAG_EXCLUDE_HV,
        ..PerfEventAttr::default()
    };
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as i32)
    }
}

fn why(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            format!("not permitted here (perf_event_paranoid={paranoid}; run as root or lower it)")
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENODEV) => {
            "not supported here".into()
        }
        _ => format!("not counted: {e}"),
    }
}

impl Counters {
    /// Opens each event on each thread of `pids`.
    pub fn open(events: &[PerfEvent], pids: &[u32]) -> Counters {
        let tids: Vec<u32> = pids
            .iter()
            .flat_map(|pid| {
                std::fs::read_dir(format!("/proc/{pid}/task"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
            })
            .collect();
        let events = events
            .iter()
            .map(|ev| {
                let mut fds = Vec::new();
                for &tid in &tids {
                    match open_counter(ev, tid) {
                        Ok(fd) => fds.push(fd),
                        // A thread that exited meanwhile is no reason to give up.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            close_all(&fds);
                            return (ev.clone(), Err(why(&e)));
                        }
                    }
                }
                if fds.is_empty() {
                    return (ev.clone(), Err("no thread to count".into()));
                }
                (ev.clone(), Ok(fds))
            })
            .collect();
        Counters { events }
    }

    /// Reads and closes every counter.
    pub fn finish(mut self) -> Vec<CounterValue> {
        std::mem::take(&mut self.events)
            .into_iter()
            .map(|(ev, fds)| match fds {
                Ok(fds) => {
                    let mut total = 0u64;
                    let mut failed = None;
                    for &fd in &fds {
                        let mut v = 0u64;
                        // SAFETY: reading 8 bytes into a u64 from a perf counter fd we own.
                        let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
                        if n == 8 {
                            total += v;
                        } else {
                            failed = Some(io::Error::last_os_error());
                        }
                    }
                    close_all(&fds);
                    match failed {
                        Some(e) => CounterValue {
                            event: ev.name,
                            value: None,
                            status: format!("not counted: {e}"),
                        },
                        None => CounterValue {
                            event: ev.name,
                            value: Some(total),
                            status: "ok".into(),
                        },
                    }
                }
                Err(why) => CounterValue {
                    event: ev.name,
                    value: None,
                    status: why,
                },
            })
            .collect()
    }
}

impl Drop for Counters {
    /// Counters never read (the monitor stopped early, or panicked) still close.
    fn drop(&mut self) {
        for (_, fds) in &self.events {
            if let Ok(fds) = fds {
                close_all(fds);
            }
        }
    }
}

fn close_all(fds: &[i32]) {
    for &fd in fds {
        // SAFETY: closing descriptors perf_event_open gave us, once.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_kernels_ver5_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    fn counters_close_their_descriptors_when_dropped_unread() {
        // Only this test opens perf events in this process, so counting them is exact.
        let perf_fds = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().contains("perf_event"))
                })
                .count()
        };
        let before = perf_fds();
        let events: Vec<PerfEvent> = ["task-clock", "context-switches"]
            .iter()
            .map(|e| e.parse().unwrap())
            .collect();
        let counters = Counters::open(&events, &[std::process::id()]);
        let opened = perf_fds() - before;
        drop(counters);
        assert_eq!(perf_fds(), before, "{opened} opened, all closed");
        if opened == 0 {
            // Closing nothing proves nothing: the part of this test that matters did not run.
            archbench_cluster::skips::cannot_run(
                "perf_event_open is not permitted here (kernel.perf_event_paranoid, or run as root)",
            );
        }
    }

    #[test]
    fn parses_event_names() {
        assert_eq!("r6e".parse::<PerfEvent>().unwrap().config, 0x6e);
        assert_eq!(
            "instructions".parse::<PerfEvent>().unwrap().kind,
            PERF_TYPE_HARDWARE
        );
        assert!("rxyz".parse::<PerfEvent>().is_err());
        assert!("bogus".parse::<PerfEvent>().is_err());
    }
}
