//! The command line: clap types and one function per subcommand over the same domain services the MCP tool uses.
//!
//! Data goes to stdout (a table, or JSON with `--json`); everything else goes to stderr. The grammar is in `args`, the
//! dispatch in `dispatch`, the subcommands by family in the other files, the helpers they share in `common`.

mod agents;
mod approvals;
mod args;
mod auth;
mod common;
mod configs;
mod dashboard;
mod dispatch;
mod entry;
mod guards;
mod introspect;
mod limits;
mod market;
mod model;
mod personal;
mod policy;
mod profiles;
mod sandbox;
mod saved;
mod scripts;
mod servers;
mod skills;
mod status;
mod tools;

pub use args::{Cli, Command, SecretsCommand};
pub use dashboard::{DashboardArgs, ENV_DASHBOARD};
pub use dispatch::run;
pub use entry::main;
