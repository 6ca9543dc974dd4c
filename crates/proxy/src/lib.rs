//! ad-proxy, the proxy of agent-discover: it owns every child MCP server (stdio processes under the child guard,
//! Streamable HTTP and legacy SSE connections), activates and deactivates them, forwards calls with timeouts,
//! aggregates their tools, resources and prompts, and recovers from crashes; its fast lane relays a stdio client's
//! tool calls to stdio children without rmcp's per-request machinery.
//!
//! Every child has exactly one owner: the `Slot` in `Inner::children`. Its process group is killed when the slot is
//! stopped, when the proxy shuts down, and (through the child guard's lifeline) when this process dies.
//!
//! What it must not know: the composition root (`App`) and its use cases; the fronts that call it (MCP, HTTP, CLI),
//! which reach it through [`Proxy`]'s methods with a [`Caller`] and hand the fast lane their writer and error shaping
//! as plain values; SQL and the database behind the registry (servers, statuses, tools, metrics and the call log go
//! through the typed APIs of `ad-registry` and `ad-store`).
//!
//! Files import only files below them. At the bottom, leaves that know nothing of the proxy (`sync`, `names`,
//! `guard`, `spawn`, `sse`, `metrics`, `coalesce`, `envelope`, `held/store`, `whole_list`, `caller`, `limits`, and the
//! data `state` keeps for the files above: `callguard/guarding`, `pages/store`, `local/server`, `personal/bounds`);
//! then `state`, the object graph as data; above it, the files that act on it, each one responsibility.

mod accounting;
mod aggregate;
pub mod approval;
mod call;
mod caller;
pub mod callguard;
mod client;
pub mod coalesce;
mod counted;
mod envelope;
mod era;
pub mod esm;
mod failure;
mod failure_body;
mod forward;
pub mod guard;
mod held;
#[cfg(windows)]
mod job;
pub mod launcher;
mod lifecycle;
pub mod limits;
pub mod local;
mod metrics;
pub mod names;
mod overrides;
pub mod pages;
mod personal;
mod policy;
mod profile_view;
mod recovery;
pub mod relay;
mod relist;
mod restore;
pub mod runtime;
pub mod sandbox;
mod single;
mod skills;
mod spans;
pub mod spawn;
mod sse;
mod start;
mod state;
mod status;
mod sync;
mod tasks;
mod tools;
mod typed;
pub mod visibility;
mod which;
mod whole_list;

use std::sync::Weak;

pub use caller::Caller;
pub use lifecycle::{Activation, FOLLOW_BACKOFF};
pub use personal::{PersonalBounds, PersonalChild};
pub use policy::{client_of, police};
pub use recovery::MAX_FAILURES;
pub use single::ServerError;
pub use skills::LoadedSkill;
pub use spawn::StderrRing;
pub use state::{CallObserver, Proxy};
pub use status::ChildStatus;
pub use tools::error_result;

use state::Inner;

#[doc(hidden)]
pub fn _assert_send() {
    fn is_send<T: Send + Sync>() {}
    is_send::<Proxy>();
    let _: Option<Weak<Inner>> = None;
}
