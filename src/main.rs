//! The `agent-discover` binary: everything is `agent_discover::cli::main` (parse the command line, send logs to
//! stderr, run the command, map failure to exit 2), kept in the library so this crate compiles almost nothing. The
//! build stamp (version, commit, target; see build.rs) is read here, so only this crate sees it, and so is the
//! allocator of the static release builds.

/// musl's malloc serialises threads on one lock and costs more instructions per call; the static builds use mimalloc
/// instead, built without transparent huge pages (feature `mimalloc`, which scripts/dist.sh turns on; BENCHMARKS.md,
/// "Release binaries", has the measurements).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agent_discover::cli::main(env!("AGENT_DISCOVER_BUILD"))
}
