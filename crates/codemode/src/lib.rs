//! ad-codemode, code mode (issue 28): an agent sends a short JavaScript program instead of calling tools one by one;
//! the program calls the tools inside agent-discover and only what it returns reaches the agent.
//!
//! The engine is QuickJS (QuickJS-ng through rquickjs's synchronous API), one runtime on its own thread per run:
//! `engine.rs` drives it, `prelude.rs` takes code generation away and defines the script's API, `bridge.rs` is the
//! host object behind that API, `meter.rs` the CPU time and wall clock, `alloc.rs` the heap, `limits.rs` the limits
//! and `answer.rs` what a run comes to. `host.rs` carries out a script's requests on the application's runtime,
//! `runner.rs` follows runs (pausing one whose call must ask the caller something), `api.rs` writes the TypeScript
//! declarations of what a script can call. Nothing in the engine reaches a file, a socket, a process, a timer or a
//! module.
//!
//! Must not know: the fronts (MCP, HTTP, CLI) and the composition root (`App`); how a tool call is carried out beyond
//! `ad_proxy::Proxy`'s one call path, which every inner call takes as a direct call does (filters, pinning, the
//! scanner's withholding, approvals, metrics and the call log apply); `find_tool` and `find_tools`, which the
//! application hands in as a [`Catalog`]. No secret is ever given to a script.

mod alloc;
mod answer;
mod api;
mod bridge;
mod engine;
mod host;
mod idents;
mod limits;
mod meter;
mod prelude;
mod runner;
pub mod schema;

pub use answer::{CallRecord, Failure, Outcome, Thrown, Uncaught};
pub use api::{ApiTool, declarations};
pub use host::Catalog;
pub use idents::ident;
pub use limits::{CODE_BYTES, Limit, Limits, MAX_CPU, MAX_RUNS};
pub use runner::{CodeMode, STATE_PREFIX, Script, Step};

#[cfg(test)]
mod tests;
