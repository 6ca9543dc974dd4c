//! Each profile's search scope, data only: the ids of its tools, kept with the profile's definition and the tools'
//! version they were made for. A leaf: `App` holds the [`Scopes`], `profiles.rs` fills and reads them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::search::Within;
use ad_core::profile::Profile;

/// One profile's search scope, with the definition and the tools' version (`Search::tools_version`) it was made for.
type Scope = (Profile, (u64, i64), Arc<Within>);

/// The search scope of each profile, by name.
#[derive(Default, Debug)]
pub struct Scopes(pub(super) Mutex<HashMap<String, Scope>>);
