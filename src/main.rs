//! The `agent-discover` binary: everything is `agent_discover::cli::main` (parse the command line, send logs to
//! stderr, run the command, map failure to exit 2), kept in the library so this crate compiles almost nothing.

fn main() -> std::process::ExitCode {
    agent_discover::cli::main()
}
