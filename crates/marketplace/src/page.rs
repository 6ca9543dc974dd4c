//! One source's page of rows, as a source fetches it and the browse cache keeps it (shared by the sources and the
//! marketplace that merges them).

use serde::{Deserialize, Serialize};

use crate::entry::MarketEntry;

/// One source's rows as fetched and cached.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Page {
    pub(crate) servers: Vec<MarketEntry>,
    #[serde(default)]
    pub(crate) next_cursor: Option<String>,
}
