//! Tool overrides: what the agent sees of a server's tool instead of the child's own definition (a new name, title,
//! description or annotations; a parameter fixed to a value or hidden with its default), and how a call by the shown
//! name is turned back into the child's (its own name, the fixed and default values merged into the arguments).
//!
//! An override is keyed by the tool's own (upstream) name. The gate (`pinning/mod.rs`) applies it to every listing,
//! so the proxy keeps the shown tool and every front, the catalog and the search index see only that; the gate also
//! remembers, per server, how a shown name maps back ([`Inbound`]), which the call path reads.
//!
//! A profile (a named view of servers and tools) carries its own `BTreeMap<(server, tool), ToolOverride>`: its view
//! applies [`ToolOverride::layer`]ed over the server's override with the same [`ToolOverride::apply`] and
//! [`Inbound`].

mod gate;
mod types;

pub(crate) use types::InboundCache;
pub use types::{ANNOTATIONS, Applied, Inbound, ToolOverride};
