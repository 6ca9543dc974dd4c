//! Idle footprint: the pages of agent-discover's own machine code that only start-up used are let go once a front is
//! serving, so an idle process holds what it runs, not what it ran once.
//!
//! Start-up (argument parsing, migrations, the registry's first reads, rmcp's handshake, the dashboard's binding) runs
//! code spread over the whole executable, and the kernel maps file pages 64 KiB at a time around each page touched
//! ("fault-around"): most of an idle process's resident set was our own executable's text (measured in
//! BENCHMARKS.md). Those pages are clean copies of the file, so unmapping them loses nothing: the code that runs later
//! is mapped again from the page cache on its first use (a minor fault). Only executable mappings of our own file are
//! released; data, relocated read-only data and heap are never touched.

use std::time::Duration;

/// How long after a front starts serving its start-up code is released.
pub const RELEASE_AFTER: Duration = Duration::from_millis(500);

/// `off`: keep start-up code mapped (to compare, or if a platform misbehaves).
pub const ENV_RELEASE: &str = "AGENT_DISCOVER_RELEASE_STARTUP_CODE";

/// Releases start-up code [`RELEASE_AFTER`] from now, once, in the background (unless [`ENV_RELEASE`] is `off`).
pub fn release_startup_code_soon() {
    if std::env::var(ENV_RELEASE).as_deref() == Ok("off") {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(RELEASE_AFTER).await;
        let released = release_startup_code();
        tracing::debug!(kib = released / 1024, "released start-up code pages");
    });
}

/// Unmaps the executable's own code pages (they are mapped again on use); returns the bytes of address range released.
#[cfg(target_os = "linux")]
pub fn release_startup_code() -> usize {
    let (Ok(exe), Ok(maps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/maps"),
    ) else {
        return 0;
    };
    let exe = exe.to_string_lossy();
    let mut released = 0;
    for line in maps.lines() {
        // start-end perms offset dev inode path
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || fields[1] != "r-xp" || fields[5..].join(" ") != exe {
            continue;
        }
        let Some((start, end)) = fields[0].split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        // SAFETY: the range is a private, read-only, executable mapping of our own executable file, never written
        // (no copy-on-write page): MADV_DONTNEED drops its page table entries and the next access maps the same file
        // contents again from the page cache. Nothing here is data whose contents could be lost.
        let rc =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if rc == 0 {
            released += end - start;
        }
    }
    released
}

/// Other platforms keep their pages.
#[cfg(not(target_os = "linux"))]
pub fn release_startup_code() -> usize {
    0
}
