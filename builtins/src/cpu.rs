//! The CPU time a program spent (issue 48: the CPU time of checks and holdouts): user and
//! system time of the program and of every process it waited for (`sh -c 'pytest'` counts
//! pytest; bubblewrap counts the sandbox), as the kernel accounts it when the program ends.
//!
//! tokio reaps a child itself and keeps no resource usage, and `getrusage(RUSAGE_CHILDREN)` is
//! the whole process's (wrong when a batch runs checks side by side). So the program's pidfd is
//! watched: when it becomes readable the program has ended, and `waitid(P_PIDFD, …, WNOWAIT)`
//! reads its usage while leaving it for tokio to reap. A pidfd names one process, never a later
//! one that reuses its id (`rustix` opens it; libc makes the `waitid`, as no safe wrapper
//! returns the usage). Linux 5.4 and later; elsewhere (or when the kernel refuses) there is
//! no figure, never a made-up one.

use std::time::Duration;

/// Watches one child of this process for its end, to read its CPU time then.
#[derive(Debug)]
pub(crate) struct Exit {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl Exit {
    /// Watches the child `pid`, which must not have been waited for yet (a zombie still names
    /// it); `None` where pidfds are not available or the runtime has no I/O driver.
    pub(crate) fn watch(pid: Option<u32>) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            let pid = rustix::process::Pid::from_raw(i32::try_from(pid?).ok()?)?;
            let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
            // SAFETY: an `OwnedFd` stays open, and names the same descriptor, until it is
            // dropped, which the `AsyncFd` that owns it does last. The runtime that spawned the
            // child has an I/O driver (tokio's process support needs one).
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            }
            .ok()
            .map(|fd| Exit { fd })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    /// Waits for the child to end and returns its CPU time (user + system, its own and that
    /// of the processes it waited for), leaving it to be reaped; `None` when the kernel does
    /// not say.
    pub(crate) async fn cpu(&self) -> Option<Duration> {
        #[cfg(target_os = "linux")]
        loop {
            let mut ready = self.fd.readable().await.ok()?;
            match usage_if_ended(std::os::fd::AsRawFd::as_raw_fd(self.fd.get_ref())) {
                Ok(Some(cpu)) => return Some(cpu),
                Ok(None) => ready.clear_ready(),
                Err(_) => return None,
            }
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

/// `waitid(P_PIDFD, fd, WEXITED | WNOHANG | WNOWAIT)` with its usage: `Some(cpu)` once the
/// process has ended (it stays a zombie for its owner to reap), `None` while it runs.
#[cfg(target_os = "linux")]
fn usage_if_ended(fd: std::os::fd::RawFd) -> std::io::Result<Option<Duration>> {
    // SAFETY: both are plain C structs for which all-zero bytes are a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the raw waitid takes (idtype, id, siginfo*, options, rusage*); both pointers are
    // to live, writable values of the right types for the call's duration.
    let done = unsafe {
        libc::syscall(
            libc::SYS_waitid,
            libc::P_PIDFD,
            fd,
            std::ptr::addr_of_mut!(info),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            std::ptr::addr_of_mut!(usage),
        )
    };
    if done < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: after a successful waitid the kernel has written si_pid (0 when, under WNOHANG,
    // nothing has ended yet).
    if unsafe { info.si_pid() } == 0 {
        return Ok(None);
    }
    Ok(Some(time(usage.ru_utime) + time(usage.ru_stime)))
}

#[cfg(target_os = "linux")]
fn time(t: libc::timeval) -> Duration {
    Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
        + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
}
