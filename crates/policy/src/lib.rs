//! Policies for tool calls: who (user, groups, client) may call which tool (server, tool) with which arguments, and
//! whether the call goes on (`allow`), is refused (`deny`) or is put to a person first (`ask`). Policies are Cedar
//! files (`*.cedar`) in a directory or one file; they are validated on load, a set that does not load keeps the last
//! good one in force (and says why in [`Policies::status`]), and the files are watched and read again on change.
//!
//! Must not know: HTTP, MCP, the proxy or storage. The fronts hand a [`Call`] in and get a [`Decision`] out; what a
//! deny or an ask means for a call (a typed error, an approval request) is the proxy's business.
//!
//! Files: `call.rs` (the vocabulary), `direct.rs` (the common conditions decided without a Cedar request),
//! `callers.rs` (which of a slice's policies can hold for a caller), `slices.rs` (the policies that can apply to each
//! tool, cut once per load), `engine.rs` (Cedar: parse, check, evaluate a call by its tool's slice), `policies.rs`
//! (the set in force), `watch.rs` (reload on change), each using only the ones before it.

mod call;
mod callers;
mod direct;
mod engine;
#[cfg(test)]
mod equivalence;
mod policies;
mod slices;
mod watch;

pub use call::{Call, Decision, EXTENSION, LOCAL_USER, LoadError, Outcome};
pub use engine::PolicyInfo;
pub use policies::Policies;
