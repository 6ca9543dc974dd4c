//! A profile's own tool overrides: what one profile's clients see of a server's tool, on top of what the server's
//! override (`overrides/`) shows everyone. A profile keeps them as `{SERVER: {TOOL: override}}`, `TOOL` being the
//! tool's own name (as for a server's override); each is applied to the tool as the server shows it, so a profile
//! renames, describes, annotates, fixes or hides what the server's override left.
//!
//! The gate (`pinning/mod.rs`) pins them with the tool: a tool's pinned definition carries `profile_overrides`
//! (`{PROFILE: override}`) beside its own definition and its server's `override`, so setting or changing a profile's
//! override is reviewed like any change, and the scanner reads each profile's shown tool. What a profile applies is
//! what was approved: [`ProfileLayer`] is made from the approved pins, never from the profile as stored.

mod layers;
mod types;

pub(crate) use types::LayerCache;
pub use types::{ByTool, FIELD, Overrides, ProfileLayer, Shown, only_dropped, parse, pinned_value};
