//! The program's entry: what `main` does, in the library (see [`main`]).

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

/// The whole program: the child guard, or the command line parsed, logs to stderr, the command run on a runtime
/// sized for it, failure mapped to exit 2. In the library, so the binary compiles almost nothing of its own (the
/// generic code of logging, parsing and the runtime is instantiated here once). `version` is what `--version`
/// prints after the name: the version, commit and target the binary was built from.
pub fn main(version: &'static str) -> ExitCode {
    // The child guard runs before anything else: no runtime, no logging, nothing on stdout.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|a| a == crate::guard::SUBCOMMAND) {
        return ExitCode::from(crate::guard::run(raw.collect()).clamp(0, 255) as u8);
    }
    let matches = crate::cli::Cli::command().version(version).get_matches();
    let cli = crate::cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // stdout may be the MCP channel, so logs always go to stderr, without colour.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENT_DISCOVER_LOG")
                .unwrap_or_else(|_| "agent_discover=info,ad_=info,warn".into()),
        )
        .init();
    // `serve` answers many HTTP clients at once and gets a worker per core. Everything else (above all `mcp`, one
    // client on stdio relaying calls to children) runs on one thread: no cross-thread wake-ups on the call path,
    // which measured 35 us of CPU less per proxied call (BENCHMARKS.md). Blocking work goes to spawn_blocking.
    let mut builder = match cli.command {
        crate::cli::Command::Serve { .. } => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // OpenTelemetry traces, when the `OTEL_*` variables ask for them (off by default: nothing started).
    let result = runtime.block_on(async {
        let traces = crate::otel::start_from_env()?;
        let result = crate::cli::run(cli).await;
        if let Some(traces) = traces {
            traces.shutdown().await;
        }
        result
    });
    // Blocking work still under way (embedding a batch of tools: seconds of CPU) must not hold the exit, which
    // dropping the runtime would do until it finishes. Whatever is cut short is redone next start: embeddings are
    // written in one transaction after their batch, and the call log and metrics were flushed before `run` returned.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
