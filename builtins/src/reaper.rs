//! Nothing a command starts outlives it (DESIGN §5): harness is a child subreaper, so a program
//! a command left running that detached itself (`setsid`, a double fork) becomes harness's child
//! when its parents are gone, instead of init's, and is killed when its command ends; and every
//! program harness starts dies with harness (a parent-death signal).
//!
//! Which adopted children are whose: every program [`spawn`] starts leads a process group of its
//! own and is registered as live until it ends; harness's own helpers (a `git` it runs itself)
//! stay in harness's group. So when a command ends, a child of harness that is in another group
//! and is not a live command's leader was adopted: it is what some ended command left behind, and
//! it is killed with everything under it. Linux only; elsewhere the process-group kill is all.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The leaders of the commands running now.
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`). Call
/// once, early in `main`. Does nothing where the platform has no such thing.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Spawns `command` (started in a process group of its own) as a command's leader: registered as
/// live (under the lock, so no sweep can take it for an adopted orphan before it is), and killed
/// by the kernel if harness dies — by a parent-death signal set in the child, unless `dies` says
/// the program sees to it itself (bubblewrap's `--die-with-parent`): a child set up before its
/// exec must be forked, where one that is not can be spawned without copying harness's memory.
pub(crate) fn spawn(
    command: &mut tokio::process::Command,
    dies: bool,
) -> std::io::Result<tokio::process::Child> {
    if !dies {
        dies_with_harness(command);
    }
    let mut live = LIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let child = command.spawn()?;
    if let Some(pid) = child.id() {
        live.insert(pid);
    }
    Ok(child)
}

/// The command led by `pid` has ended (its group killed): forgets it, then kills whatever ended
/// commands left behind (on a blocking thread: it reads `/proc` and waits for the killed).
pub(crate) async fn ended(pid: Option<u32>) {
    if let Some(pid) = pid {
        LIVE.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&pid);
    }
    #[cfg(target_os = "linux")]
    let _ = tokio::task::spawn_blocking(sweep).await;
}

/// Sets the parent-death signal of the child: SIGKILL when harness dies, however it dies.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn dies_with_harness(command: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec and only makes one prctl call,
    // which is async-signal-safe; it touches no memory of the parent's threads.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn dies_with_harness(_command: &mut tokio::process::Command) {}

/// One process as `/proc/PID/stat` says: its id, parent and group.
#[cfg(target_os = "linux")]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
}

/// The children of harness (of all its threads), as the kernel lists them; `None` where it does
/// not (a kernel built without `/proc/PID/task/TID/children`). The lists can miss a child that
/// forks or exits while they are read: what one sweep misses, the next command's end sweeps.
#[cfg(target_os = "linux")]
fn children() -> Option<Vec<i32>> {
    if !std::path::Path::new("/proc/thread-self/children").exists() {
        return None;
    }
    let mut all = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // A thread that ended meanwhile has no list, and no children.
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            all.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    Some(all)
}

/// The process group of `pid`, from `/proc/PID/stat`.
#[cfg(target_os = "linux")]
fn group_of(pid: i32) -> Option<i32> {
    stat(pid).map(|p| p.pgid)
}

/// `/proc/PID/stat` of `pid`: its parent and group.
#[cfg(target_os = "linux")]
fn stat(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(1);
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc { pid, ppid, pgid })
}

/// Every process this user can see.
#[cfg(target_os = "linux")]
fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// Kills every adopted child of harness outside harness's group and not a live command's
/// leader, with all it started; a few rounds, for what forks while it is being killed.
#[cfg(target_os = "linux")]
fn sweep() {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    use nix::unistd::{Pid, getpgrp};

    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let group = getpgrp().as_raw();
    for _ in 0..5 {
        // Held until the adopted are killed: a command spawned meanwhile would be a child of
        // harness in a group of its own that is not yet live, and be taken for an orphan (its
        // spawn then fails, `No child processes`, having been killed and reaped here).
        let live = LIVE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Usually nothing was left behind: harness's own children answer that without reading
        // every process there is.
        if let Some(children) = children() {
            let left = children.into_iter().any(|pid| {
                !u32::try_from(pid).is_ok_and(|pid| live.contains(&pid))
                    && group_of(pid).is_some_and(|g| g != group)
            });
            if !left {
                return;
            }
        }
        let table = processes();
        let adopted: Vec<i32> = table
            .iter()
            .filter(|p| {
                p.ppid == me
                    && p.pgid != group
                    && !u32::try_from(p.pid).is_ok_and(|pid| live.contains(&pid))
            })
            .map(|p| p.pid)
            .collect();
        if adopted.is_empty() {
            return;
        }
        let mut doomed = adopted.clone();
        let mut next = 0;
        while next < doomed.len() {
            let parent = doomed[next];
            doomed.extend(table.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
            next += 1;
        }
        for pid in &doomed {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        drop(live);
        // The adopted are harness's children now: wait for them, or they stay as zombies.
        for pid in adopted {
            for _ in 0..50 {
                match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
                    Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    _ => break,
                }
            }
        }
    }
}
