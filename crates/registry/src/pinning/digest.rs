//! What a pin is taken over: a tool's pinned parts with object keys sorted at every depth, and their fingerprint.
//! A leaf: the gate (`mod.rs`), the scanner's step (`scan.rs`) and the overrides (`overrides/`,
//! `profile_overrides/`) all digest definitions the same way.

use std::collections::BTreeMap;

use rmcp::model::Tool;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fields of a tool a pin is taken over.
pub(crate) const PINNED_PARTS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The pinned parts of a tool, with object keys sorted at every depth (the fingerprint must not depend on the order
/// in which a server happens to send keys).
pub fn definition(tool: &Tool) -> Value {
    let full = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut d = serde_json::Map::new();
    for key in PINNED_PARTS {
        d.insert(key.into(), canonical(full.get(key).unwrap_or(&Value::Null)));
    }
    // Sorted here too: serde_json's maps keep insertion order in this build (a dependency turns `preserve_order` on),
    // and fingerprints stored by earlier builds were taken over sorted keys.
    canonical(&Value::Object(d))
}

/// `v` with object keys sorted at every depth (arrays keep their order).
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, canonical(v))).collect();
            let mut out = serde_json::Map::new();
            for (k, v) in sorted {
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Hex SHA-256 of a definition's compact JSON (keys sorted by [`definition`]).
pub fn fingerprint(definition: &Value) -> String {
    let digest = Sha256::digest(definition.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
