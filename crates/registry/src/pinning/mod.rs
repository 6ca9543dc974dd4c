//! Tool pinning (the rug-pull defence) and per-server allow/deny filters: which of a child's tools are exposed.
//!
//! Every tool a child lists passes [`Registry::gate_tools`] before the proxy keeps it: a tool the server's filters
//! hide is dropped (to callers it does not exist); every other tool is fingerprinted (SHA-256 over its name, title,
//! description, input and output schema and annotations) and compared with its approved pin. A tool whose
//! fingerprint differs from the approved one is withheld (not listed, not indexed for `find_tool`, calls refused
//! with `tool_changed`) until someone approves it. A tool with an override (`overrides/`) is pinned as its own
//! definition plus the override and the overrides profiles set on it (a change of any is reviewed), and scanned as
//! every agent will see it. Tools of a server seen for the first time, and new tools of a
//! known server, are approved automatically unless the [`Policy`] says to hold them.

use std::collections::{BTreeMap, HashMap};

use rmcp::model::Tool;
use serde::Serialize;
use serde_json::{Value, json};

use crate::registry::Registry;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_store::PinRow;

pub(crate) mod digest;
pub mod policy;
pub mod scan;
pub use digest::{canonical, definition, fingerprint};
pub use policy::{ENV_NEW_SERVERS, ENV_NEW_TOOLS, ENV_SCAN, Policy, ScanMode};

/// The tool a pinned definition was taken from: its own fields, without what overrides added to the pin.
fn own_tool(pinned: &Value) -> Option<Tool> {
    let mut own = serde_json::Map::new();
    for key in digest::PINNED_PARTS {
        if let Some(v) = pinned.get(key).filter(|v| !v.is_null()) {
            own.insert(key.into(), v.clone());
        }
    }
    serde_json::from_value(Value::Object(own)).ok()
}

/// `*` matches any run of characters, `?` any one; everything else matches itself.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A server's filters: with an allow list, only matching tools; a deny match always hides.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Names tools are shown under by their overrides, to their own names (`overrides/`): patterns match a tool's
    /// own name, whichever name it is asked by.
    #[serde(skip)]
    pub renamed: BTreeMap<String, String>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        let tool = self.renamed.get(tool).map_or(tool, String::as_str);
        (self.allow.is_empty() || self.allow.iter().any(|p| glob_matches(p, tool)))
            && !self.deny.iter().any(|p| glob_matches(p, tool))
    }

    /// At most 64 patterns per list, each 1-128 printable characters.
    pub fn validate(&self) -> Result<()> {
        for (what, list) in [("allow", &self.allow), ("deny", &self.deny)] {
            if list.len() > 64 {
                return Err(Error::invalid(what, "at most 64 patterns"));
            }
            for p in list {
                if p.is_empty() || p.len() > 128 || p.chars().any(char::is_control) {
                    return Err(Error::invalid(
                        what,
                        format!(
                            "pattern {:?} must be 1-128 printable characters (`*` and `?` are wildcards)",
                            ad_core::model::truncate_for_message(p)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Registry {
    /// A server's tool filter (none: everything passes).
    pub fn tool_filter(&self, server_id: i64) -> Result<ToolFilter> {
        let (allow, deny) = self.store().tool_filter(server_id)?;
        let renamed = self
            .tool_overrides(server_id)?
            .into_iter()
            .filter_map(|(own, o)| o.name.filter(|n| *n != own).map(|n| (n, own)))
            .collect();
        Ok(ToolFilter {
            allow,
            deny,
            renamed,
        })
    }

    /// Whether `tool` of `server` passes its filter (a server that does not exist has no tools to pass).
    pub fn tool_allowed(&self, server: &str, tool: &str) -> bool {
        self.get(server)
            .and_then(|s| self.tool_filter(s.id))
            .is_ok_and(|f| f.allows(tool))
    }

    /// The tools of a fresh listing that may be exposed (see the module comment); records what it saw and emits an
    /// event for each change. Fails closed: if the pins cannot be read, nothing is exposed.
    pub fn gate_tools(&self, server_id: i64, server: &str, listed: Vec<Tool>) -> Vec<Tool> {
        match self.try_gate(server_id, server, listed) {
            Ok(tools) => tools,
            Err(e) => {
                tracing::warn!(server, error = %e, "cannot check tool pins; withholding every tool");
                Vec::new()
            }
        }
    }

    fn try_gate(&self, server_id: i64, server: &str, listed: Vec<Tool>) -> Result<Vec<Tool>> {
        let filter = self.tool_filter(server_id)?;
        let pins: HashMap<String, PinRow> = self
            .store()
            .pins_of(server_id)?
            .into_iter()
            .map(|p| (p.tool.clone(), p))
            .collect();
        let first_sight = !pins
            .keys()
            .any(|k| scan::split_key(k).0 == ad_scan::Kind::Tool);
        let policy = self.pin_policy();
        // What the agent will see: each tool with its override applied (`overrides/`); filters and pins key on the
        // tool's own name, the pin covers its own definition and the override together, the scanner reads the shown.
        let overrides = self.tool_overrides(server_id)?;
        let listed = self.apply_overrides(server_id, server, overrides, listed);
        // Profiles' own overrides are pinned with the tool too, each profile's shown tool scanned
        // (`profile_overrides/`); what profiles apply is remade from the approved pins after this listing.
        let by_profile = self.profile_overrides_on(server)?;
        self.note_gated(server, by_profile.clone());
        // The scanner's view of the registry, loaded only if some definition is new or changed.
        let own: Vec<String> = listed.iter().map(|(t, _)| t.name.to_string()).collect();
        let mut names: Option<scan::Names> = None;
        let mut scan_def = |def: &Value| -> Result<Vec<ad_scan::Finding>> {
            if policy.scan == ScanMode::Off {
                return Ok(Vec::new());
            }
            if names.is_none() {
                names = Some(scan::Names::load(self, server, &own)?);
            }
            Ok(names
                .as_ref()
                .map(|n| n.scan(server, ad_scan::Kind::Tool, def))
                .unwrap_or_default())
        };
        let mut exposed = Vec::with_capacity(listed.len());
        for (tool, overridden) in listed {
            // With an override: the pinned definition is the tool's own plus the override (a change of either is
            // reviewed), the scanned one what the agent sees.
            let (name, def, shown) = match overridden {
                None => (tool.name.to_string(), definition(&tool), None),
                Some(o) => {
                    let mut def = o.definition;
                    def["override"] =
                        canonical(&serde_json::to_value(&o.applied).unwrap_or(Value::Null));
                    (o.tool, def, Some(definition(&tool)))
                }
            };
            if !filter.allows(&name) {
                continue;
            }
            let mut def = def;
            let mut variants = Vec::new();
            if let Some(profiles) = by_profile.get(&name) {
                def[crate::profile_overrides::FIELD] =
                    crate::profile_overrides::pinned_value(profiles);
                variants.extend(profiles.values().map(|o| definition(&o.apply(&tool).0)));
            }
            let fp = fingerprint(&def);
            let seen = shown.as_ref().unwrap_or(&def);
            // The scanner reads every shown form: the server's, and each profile's.
            let mut scan_all = |seen: &Value| -> Result<Vec<ad_scan::Finding>> {
                let mut findings = scan_def(seen)?;
                for v in &variants {
                    findings.extend(scan_def(v)?);
                }
                Ok(findings)
            };
            match pins.get(&name) {
                None => {
                    let findings = scan_all(seen)?;
                    let flagged = ad_scan::withholds(&findings);
                    let hold = flagged && policy.scan == ScanMode::On;
                    let approve = !hold
                        && if first_sight {
                            policy.approve_new_servers
                        } else {
                            policy.approve_new_tools
                        };
                    self.store().record_pin(
                        server_id,
                        &name,
                        &fp,
                        &def,
                        scan::findings_json(&findings).as_ref(),
                        approve.then_some("policy"),
                    )?;
                    self.emit(Event::ToolPinChanged {
                        name: server.to_owned(),
                        tool: name.clone(),
                        change: "new",
                        withheld: !approve,
                    });
                    if flagged || ad_scan::warns(&findings) {
                        self.announce_flag(server, &name, ad_scan::Kind::Tool, &findings, hold);
                    }
                    if approve {
                        self.emit(Event::ToolApproved {
                            name: server.to_owned(),
                            tool: name,
                            by: "policy".into(),
                        });
                        exposed.push(tool);
                    }
                }
                Some(pin) if pin.approved_fingerprint.as_deref() == Some(fp.as_str()) => {
                    if pin.current_fingerprint != fp {
                        // Changed, then changed back to what was approved (and scanned, or approved as it is).
                        self.store()
                            .record_pin(server_id, &name, &fp, &def, None, None)?;
                        self.emit(Event::ToolPinChanged {
                            name: server.to_owned(),
                            tool: name,
                            change: "reverted",
                            withheld: false,
                        });
                    }
                    exposed.push(tool);
                }
                // Only profiles' overrides gone (a profile removed, an override cleared): nothing new to review.
                Some(pin)
                    if pin
                        .approved_definition
                        .as_ref()
                        .is_some_and(|a| crate::profile_overrides::only_dropped(a, &def)) =>
                {
                    self.store()
                        .record_pin(server_id, &name, &fp, &def, None, Some("profiles"))?;
                    exposed.push(tool);
                }
                Some(pin) => {
                    if pin.current_fingerprint != fp {
                        // Withheld for changing in any case; the findings tell the reviewer what the change carries.
                        let findings = scan_all(seen)?;
                        self.store().record_pin(
                            server_id,
                            &name,
                            &fp,
                            &def,
                            scan::findings_json(&findings).as_ref(),
                            None,
                        )?;
                        if ad_scan::withholds(&findings) {
                            self.announce_flag(server, &name, ad_scan::Kind::Tool, &findings, true);
                        }
                        self.emit(Event::ToolPinChanged {
                            name: server.to_owned(),
                            tool: name.clone(),
                            change: if pin.approved_fingerprint.is_some() {
                                "changed"
                            } else {
                                "new"
                            },
                            withheld: true,
                        });
                        tracing::warn!(
                            server,
                            tool = %name,
                            "tool definition differs from the approved one; withheld until approved"
                        );
                    }
                }
            }
        }
        Ok(exposed)
    }

    /// Reviews `server`'s tools again as last seen (each pin's current definition, the tool's own part), for a
    /// process that changed what the agent sees of them (an override, a profile's override) without running the
    /// child: the pins then say at once what the serving process will say when it next lists the tools, so a status
    /// read or an approval right after the change covers the change.
    pub fn gate_last_seen(&self, server_id: i64, server: &str) -> Result<()> {
        let tools: Vec<Tool> = self
            .store()
            .pins_of(server_id)?
            .into_iter()
            .filter(|p| scan::split_key(&p.tool).0 == ad_scan::Kind::Tool)
            .filter_map(|p| own_tool(&p.current_definition))
            .collect();
        if !tools.is_empty() {
            self.try_gate(server_id, server, tools)?;
        }
        Ok(())
    }

    /// Whether `tool` of `server` is withheld because it differs from (or was never given) an approval.
    pub fn tool_withheld(&self, server: &str, tool: &str) -> bool {
        self.store()
            .pin(server, tool)
            .ok()
            .flatten()
            .is_some_and(|p| p.pending() && self.tool_allowed(server, tool))
    }
}

/// One pinned field that differs between the approved and the current definition.
#[derive(Debug, Clone, Serialize)]
pub struct FieldChange {
    pub field: String,
    pub approved: Value,
    pub current: Value,
}

/// What changed in a tool since it was approved.
pub fn diff(pin: &PinRow) -> Vec<FieldChange> {
    let empty = Value::Null;
    let approved = pin.approved_definition.as_ref().unwrap_or(&empty);
    // The tool's own pinned parts, then what the server's and the profiles' overrides make of it.
    let fields = digest::PINNED_PARTS
        .into_iter()
        .chain(["override", crate::profile_overrides::FIELD]);
    fields
        .filter_map(|f| {
            let (a, c) = (
                approved.get(f).unwrap_or(&Value::Null),
                pin.current_definition.get(f).unwrap_or(&Value::Null),
            );
            (a != c).then(|| FieldChange {
                field: f.to_owned(),
                approved: a.clone(),
                current: c.clone(),
            })
        })
        .collect()
}

/// A pending tool (or flagged prompt or resource template) as the surfaces show it: `status` is `flagged` when the
/// scanner holds it, `warning` when it is served with a scanner warning (a `medium` finding), else `changed` or
/// `new` (pinning holds it).
pub fn pending_view(p: &PinRow) -> Value {
    let (kind, _) = scan::split_key(&p.tool);
    let reasons = p.findings.as_ref().map(scan::reasons).unwrap_or_default();
    let status = if !reasons.is_empty() {
        "flagged"
    } else if !p.pending() && p.findings.as_ref().is_some_and(scan::warning) {
        "warning"
    } else if p.approved_fingerprint.is_some() {
        "changed"
    } else {
        "new"
    };
    json!({
        "server": p.server, "tool": p.tool, "kind": kind.as_str(),
        "status": status,
        "findings": p.findings.clone().unwrap_or(Value::Array(vec![])),
        "approved_fingerprint": p.approved_fingerprint, "current_fingerprint": p.current_fingerprint,
        "approved_at": p.approved_at, "seen_at": p.seen_at,
        "changes": diff(p),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("delete_*", "delete_file"));
        assert!(!glob_matches("delete_*", "read_file"));
        assert!(glob_matches("*_file", "read_file"));
        assert!(glob_matches("r?ad*", "read_file"));
        assert!(glob_matches("a*b*c", "aXXbYYc"));
        assert!(!glob_matches("a*b*c", "aXXbYY"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
        let f = ToolFilter {
            allow: vec!["read_*".into(), "list_*".into()],
            deny: vec!["*secret*".into()],
            ..Default::default()
        };
        assert!(f.allows("read_file"));
        assert!(!f.allows("write_file"));
        assert!(!f.allows("read_secret_key"));
        assert!(ToolFilter::default().allows("x"));
    }

    #[test]
    fn fingerprints_cover_the_pinned_fields_and_ignore_key_order() {
        let t: Tool = serde_json::from_value(json!({"name": "t", "description": "d",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}}))
        .unwrap();
        let reordered: Tool = serde_json::from_value(json!({"description": "d", "name": "t",
            "inputSchema": {"properties": {"b": {"type": "number"}, "a": {"type": "string"}}, "type": "object"}}))
        .unwrap();
        let fp = fingerprint(&definition(&t));
        assert_eq!(fp.len(), 64);
        assert_eq!(fp, fingerprint(&definition(&reordered)));
        for change in [
            json!({"description": "d2"}),
            json!({"title": "T"}),
            json!({"annotations": {"destructiveHint": true}}),
            json!({"outputSchema": {"type": "object"}}),
            json!({"inputSchema": {"type": "object"}}),
        ] {
            let mut v = serde_json::to_value(&t).unwrap();
            for (k, x) in change.as_object().unwrap() {
                v[k] = x.clone();
            }
            let changed: Tool = serde_json::from_value(v).unwrap();
            assert_ne!(fp, fingerprint(&definition(&changed)), "{change}");
        }
    }
}
