//! Readings of the operating system that several layers need: a thread's CPU time, its
//! scheduler demand, the CPU model and features. Imports nothing of ours, so the engine, the
//! monitors and the result document can all use it without importing each other.

/// CPU seconds (user, system) of the calling thread.
pub fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// Nanoseconds a thread ran plus waited to run (/proc/…/schedstat): how much of a core it
/// wanted, whether or not it got it.
pub fn schedstat_demand_ns(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut f = text.split_whitespace();
    let ran: u64 = f.next()?.parse().ok()?;
    let waited: u64 = f.next()?.parse().ok()?;
    Some(ran + waited)
}

/// The calling thread's kernel id.
pub fn this_thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u64 }
}

/// The calling thread's demand in seconds, if the kernel keeps schedstat.
pub fn this_thread_demand_s() -> Option<f64> {
    schedstat_demand_ns("/proc/thread-self/schedstat").map(|ns| ns as f64 / 1e9)
}

/// Logical CPUs available to this process.
pub fn logical_cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// The CPU's model name ("implementer 0x41 part 0xd0c" on aarch64 kernels, which name the
/// part, not the model), or "unknown".
pub fn cpu_model() -> String {
    cpu_model_in(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
}

/// [`cpu_model`] of a /proc/cpuinfo text (this machine's, or a pod's read through exec).
pub fn cpu_model_in(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    field("model name")
        .or_else(|| {
            field("CPU part").map(|p| {
                format!(
                    "implementer {} part {p}",
                    field("CPU implementer").unwrap_or_default()
                )
            })
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Whether this CPU has ARMv8.1 LSE atomics (None off aarch64).
pub fn cpu_has_lse() -> Option<bool> {
    if std::env::consts::ARCH != "aarch64" {
        return None;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    Some(lse_in_cpuinfo(&cpuinfo))
}

/// Whether a /proc/cpuinfo text lists the "atomics" feature (LSE).
pub fn lse_in_cpuinfo(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("Features"))
        .any(|l| l.split_whitespace().any(|f| f == "atomics"))
}

/// A file under /proc/sys, trimmed ("" when unreadable).
pub fn proc_sys(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether process `pid` holds a listening TCP socket on `addr` (IPv4): a LISTEN entry of
/// its network namespace's /proc/PID/net/tcp whose inode is one of its descriptors.
pub fn listens_on(pid: u32, addr: std::net::SocketAddr) -> bool {
    let std::net::SocketAddr::V4(want) = addr else {
        return false;
    };
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")) else {
        return false;
    };
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            let (ip, port) = local.split_once(':')?;
            // The kernel prints the address as the native integer of its network-order bytes.
            let ip = std::net::Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_ne_bytes());
            let port = u16::from_str_radix(port, 16).ok()?;
            (*state == "0A" && ip == *want.ip() && port == want.port())
                .then(|| format!("socket:[{inode}]"))
        })
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lse_flag_in_cpuinfo() {
        assert!(lse_in_cpuinfo(
            "processor : 0\nFeatures : fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp\n"
        ));
        assert!(!lse_in_cpuinfo(
            "processor : 0\nFeatures : fp asimd evtstrm crc32\n"
        ));
    }

    #[test]
    fn finds_our_own_listening_socket_and_no_other() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert!(listens_on(std::process::id(), addr));
        drop(l);
        assert!(!listens_on(std::process::id(), addr));
        // PID 1 does not hold our socket even while we listen.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!listens_on(1, l.local_addr().unwrap()));
    }

    #[test]
    fn this_thread_has_cpu_time() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let (u, s) = thread_cpu();
        assert!(u + s > 0.0);
    }
}
