//! The scanner's semantic signal in the application: the search's local embedding model (all-MiniLM-L6-v2, loaded on
//! first use and unloaded when idle, as for search) lent to the scanner (`ad_scan::Model`) when
//! `AGENT_DISCOVER_SCAN_MODEL` asks for it and search has the local model; and what `status` says about it. Without
//! it the scanner's rules decide alone.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::search::Provider;
use crate::search::provider::LocalModel;

/// `on` or `off`: whether new and changed definitions are also read by the semantic signal.
pub const ENV_SCAN_MODEL: &str = "AGENT_DISCOVER_SCAN_MODEL";
/// Off unless asked for: the signal adds no withheld tool the rules miss on the measured sets and costs milliseconds
/// per definition (BENCHMARKS.md, "Tool scanner, third pass").
const DEFAULT_ON: bool = false;

/// The search's local model as the scanner's encoder.
struct SearchModel(Arc<LocalModel>);

impl ad_scan::Encoder for SearchModel {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let run = || self.0.embed_now(texts).map_err(|e| e.to_string());
        // The gate scans on an async worker: let the runtime move its other tasks away meanwhile.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        }
    }
}

fn wanted() -> bool {
    match std::env::var(ENV_SCAN_MODEL) {
        Ok(v) if v.trim().eq_ignore_ascii_case("on") => true,
        Ok(v) if v.trim().eq_ignore_ascii_case("off") => false,
        Ok(v) if !v.trim().is_empty() => {
            tracing::warn!("{ENV_SCAN_MODEL}={v:?} is not on or off; using the default");
            DEFAULT_ON
        }
        _ => DEFAULT_ON,
    }
}

/// The model to lend the scanner, given search's provider: the local model when asked for and there.
pub fn from_env(provider: &Provider) -> Option<Arc<ad_scan::Model>> {
    match provider {
        Provider::Local(local) if wanted() => {
            Some(Arc::new(ad_scan::Model::new(SearchModel(local.clone()))))
        }
        _ => None,
    }
}

/// The semantic signal's state for `status`: `on`, `off` with why, or `unavailable` with why.
pub fn status(registry: &crate::registry::Registry, search: &Value) -> Value {
    match registry.scan_model().map(|m| m.state()) {
        Some(None) => {
            json!({"semantic": "on", "detail": "the model loads with the first definition scanned"})
        }
        Some(Some(Ok(()))) => json!({"semantic": "on"}),
        Some(Some(Err(e))) => json!({"semantic": "unavailable", "detail": e}),
        None if !wanted() => {
            json!({"semantic": "off", "detail": format!("{ENV_SCAN_MODEL} is not on")})
        }
        None => json!({"semantic": "off", "detail": format!("no local embedding model: {}",
            search["fallback_reason"].as_str().unwrap_or("search does not use the local model"))}),
    }
}
