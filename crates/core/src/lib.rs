//! agent-discover's vocabulary: the domain model (servers, tools, statuses, limits), the one error type, the event bus,
//! the clock thread, call telemetry and trace context. Every other crate speaks these types.
//!
//! Must not know: storage (no SQL, no database driver), processes, HTTP, MCP transports, or any crate of this
//! workspace. Nothing here does I/O beyond the clock's own thread.
#![forbid(unsafe_code)]

pub mod clock;
pub mod error;
pub mod events;
pub mod guards;
pub mod identity;
pub mod limits;
pub mod model;
pub mod netallow;
pub mod profile;
pub mod sandbox;
pub mod telemetry;
pub mod trace;
