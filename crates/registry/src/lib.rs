//! The registry domain between storage and the proxy: registered servers and their tools (`registry`), sealed
//! per-server secrets (`secrets`), tool pinning and filters (`pinning`), tool overrides (`overrides`) and a profile's own (`profile_overrides`), approval policies and the digest approvals are
//! bound to (`approval`), per-server sandbox settings (`sandbox`), the call log (`calllog`) and the resolved
//! configuration (`config`).
//!
//! Must not know: the composition root (`App`), child processes, OAuth flows, or any front (MCP, HTTP, CLI). It holds
//! handles to the store and the event bus and nothing above them.
#![forbid(unsafe_code)]

pub mod approval;
pub mod calllog;
pub mod config;
pub mod guards;
pub mod limits;
pub mod overrides;
pub mod personal;
pub mod pinning;
pub mod profile_overrides;
pub mod registry;
pub mod sandbox;
pub mod secrets;
