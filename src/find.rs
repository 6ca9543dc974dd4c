//! The search use cases over the whole system: `find_tool` (tools of active, inactive and catalog servers, and
//! agents whose skills fit better), the catalog summary the `registry` tool describes itself with, and uninstall.

use crate::app::App;
use crate::error::Result;

impl App {
    /// Removes a server, stopping it first if it runs here, and its sandbox state directory (its HOME: caches and
    /// whatever it wrote there), so a server registered again under the name starts clean.
    pub async fn uninstall(&self, name: &str) -> Result<()> {
        self.registry.get(name)?;
        self.proxy.deactivate(name).await?;
        self.registry.remove(name)?;
        let state = crate::proxy::sandbox::state_dir(&self.config.sandbox, name);
        if let Err(e) = std::fs::remove_dir_all(&state)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(server = name, dir = %state.display(), error = %e, "cannot remove the server's state directory");
        }
        Ok(())
    }
}

/// The answer to `find_tool` (agent-discover's response shape).
// Built once per query and serialized at once: the size difference of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum FindOutcome {
    Found {
        found: bool,
        confidence: &'static str,
        score: f64,
        call_as: String,
        server: String,
        tool: String,
        description: String,
        required_args: Vec<serde_json::Value>,
        optional_count: usize,
        next_step: String,
        /// The owning server's state: `active`, `inactive` (started on first call or activate) or `error`.
        server_status: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        activation_error: Option<String>,
        /// The server waits for an OAuth authorization: a person opens this URL (`agent-discover auth SERVER`).
        #[serde(rename = "authUrl", skip_serializing_if = "Option::is_none")]
        auth_url: Option<String>,
        /// The next best tools, each with what calling it needs (`call_as`, `score`, a short `description`, the names
        /// of its `required_args`); their servers' state is in `servers`, once per server.
        other_matches: Vec<serde_json::Value>,
        /// The state of each server in `other_matches` other than the best match's own: `status`, and for a catalog
        /// entry (not installed) its one `install` block.
        #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
        servers: serde_json::Map<String, serde_json::Value>,
        /// False for a catalog entry: a marketplace server introspected but not installed.
        installed: bool,
        /// What installing a catalog entry needs (`install` arguments, required secrets and arguments).
        #[serde(skip_serializing_if = "Option::is_none")]
        install: Option<serde_json::Value>,
        /// For a catalog entry: what the tool scanner found in its definition (installing it does not expose a
        /// flagged tool until a person approves it); for an installed tool, the scanner's warnings (`medium`
        /// findings: served, shown here).
        #[serde(skip_serializing_if = "Option::is_none")]
        findings: Option<serde_json::Value>,
    },
    NotFound {
        found: bool,
        top_score: f64,
        hint: String,
    },
    /// An agent whose skill fits the query better than any tool (#15): open a session with it.
    Agent {
        found: bool,
        /// Always `agent`.
        kind: &'static str,
        score: f64,
        /// The tool to call next (`sessions_create`), with `call.arguments`.
        call_as: &'static str,
        call: serde_json::Value,
        agent: String,
        skill: String,
        description: String,
        /// The agent's last known status.
        agent_status: &'static str,
        next_step: String,
        /// The best tools, as `find_tool` would have listed them.
        other_matches: Vec<serde_json::Value>,
    },
}

impl App {
    /// The scanner's findings on a catalog entry's tool that would withhold it once installed (`high`) or show it
    /// with a warning (`medium`), as `find_tool` shows them (none: `None`): each finding's rule, severity and field for the best match
    /// (`brief`: the rule names alone, for the other matches). Every finding, with its excerpt and detail, is in
    /// `catalog list --json` and, once installed, `tools diff`.
    fn catalog_findings(
        &self,
        tool: &crate::model::ToolRecord,
        brief: bool,
    ) -> Option<serde_json::Value> {
        let def = serde_json::json!({"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema});
        let f = self.registry.catalog_findings(&tool.server, &def);
        let f: Vec<_> = f
            .into_iter()
            .filter(|f| f.severity != ad_scan::Severity::Low)
            .collect();
        let v = ad_registry::pinning::scan::findings_json(&f)?;
        Some(brief_findings(&v, brief))
    }

    /// The scanner's warnings on an installed tool that is served (its pin's `medium` findings), as `find_tool`
    /// shows them beside the match (none: `None`).
    fn served_warnings(
        &self,
        tool: &crate::model::ToolRecord,
        brief: bool,
    ) -> Option<serde_json::Value> {
        let pin = self
            .registry
            .store()
            .pin(&tool.server, &tool.name)
            .ok()
            .flatten()?;
        if pin.pending() {
            return None;
        }
        let findings = pin.findings?;
        if !ad_registry::pinning::scan::warning(&findings) {
            return None;
        }
        let medium: Vec<serde_json::Value> = findings
            .as_array()?
            .iter()
            .filter(|f| f["severity"] == "medium")
            .cloned()
            .collect();
        Some(brief_findings(&serde_json::Value::Array(medium), brief))
    }
}

/// Findings as `find_tool` shows them: rule, severity and field (`brief`: the rule names alone).
fn brief_findings(v: &serde_json::Value, brief: bool) -> serde_json::Value {
    let mut v = v.clone();
    for finding in v.as_array_mut().into_iter().flatten() {
        *finding = if brief {
            finding["rule"].clone()
        } else {
            serde_json::json!({"rule": finding["rule"], "severity": finding["severity"], "field": finding["field"]})
        };
    }
    v
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Longest description of the best match in an answer, and of another match (`get_schema` has them whole).
const BEST_DESCRIPTION: usize = 300;
const OTHER_DESCRIPTION: usize = 60;
/// Longest description of a required argument in an answer.
const ARG_DESCRIPTION: usize = 80;

/// `text` on one line (runs of white space as one space), cut at a word boundary to at most `max` characters and then
/// marked with `…`.
fn brief(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > max / 2 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([',', ';', ':', '.', ' ']))
}

/// The required arguments of a tool as an answer shows them: name and type, and a brief description when it has one.
fn brief_args(args: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    args.into_iter()
        .map(|mut a| {
            match a.get("description").and_then(|d| d.as_str()) {
                Some(d) if !d.trim().is_empty() => {
                    a["description"] = serde_json::Value::String(brief(d, ARG_DESCRIPTION))
                }
                _ => {
                    if let Some(o) = a.as_object_mut() {
                        o.remove("description");
                    }
                }
            }
            a
        })
        .collect()
}

/// A catalog entry's install block as an answer shows it: the `install` call and what it needs, without bookkeeping,
/// empty fields or secrets the call already names as `inputs` (`catalog list --json` has the whole record).
fn brief_install(mut info: serde_json::Value) -> serde_json::Value {
    let inputs = info["install"]["inputs"].clone();
    if let Some(o) = info.as_object_mut() {
        o.remove("introspected_at");
        let named = |v: &serde_json::Value| {
            v.as_array().is_some_and(|a| {
                a.iter()
                    .all(|s| inputs.as_array().is_some_and(|i| i.contains(s)))
            })
        };
        if o.get("required_secrets").is_some_and(named) {
            o.remove("required_secrets");
        }
        if o.get("required_args").is_some_and(named) {
            o.remove("required_args");
        }
        o.retain(|_, v| match v {
            serde_json::Value::Null | serde_json::Value::Bool(false) => false,
            serde_json::Value::Array(a) => !a.is_empty(),
            _ => true,
        });
    }
    info
}

/// Longest list of servers named in `App::catalog_summary`.
const SUMMARY_CHARS: usize = 360;

impl App {
    /// A few lines for the `registry` tool's description and the server's instructions: what is installed (servers by
    /// tool count, bounded length) and that `find_tool` finds any of their tools by task.
    pub fn catalog_summary(&self) -> String {
        // The same until something commits to the store (here or in another process).
        let marker = self.registry.store().change_marker().ok();
        let mut cached = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(m), Some((at, text))) = (marker, cached.as_ref())
            && m == *at
        {
            return text.clone();
        }
        let text = self.catalog_summary_now();
        if let Some(m) = marker {
            *cached = Some((m, text.clone()));
        }
        text
    }

    fn catalog_summary_now(&self) -> String {
        let mut rows = self
            .registry
            .list(&crate::model::ListFilter::default())
            .unwrap_or_default();
        if rows.is_empty() {
            return "No MCP servers are installed yet: `browse` the marketplaces and `install` one; find_tool then \
                    finds its tools by task."
                .into();
        }
        rows.sort_by(|a, b| {
            b.tool_count
                .cmp(&a.tool_count)
                .then_with(|| a.server.name.cmp(&b.server.name))
        });
        let tools: i64 = rows.iter().map(|r| r.tool_count).sum();
        let mut list = String::new();
        let mut shown = 0;
        for r in &rows {
            let item = format!("{} ({})", r.server.name, r.tool_count);
            if !list.is_empty() && list.len() + item.len() + 2 > SUMMARY_CHARS {
                break;
            }
            if !list.is_empty() {
                list.push_str(", ");
            }
            list.push_str(&item);
            shown += 1;
        }
        if shown < rows.len() {
            list.push_str(&format!(", +{} more", rows.len() - shown));
        }
        format!(
            "Installed: {} servers with {tools} known tools: {list}. find_tool finds the right one of these tools for a \
             task described in plain words (e.g. {{\"action\":\"find_tool\",\"query\":\"post a message to the team chat\"}}) \
             and returns its call_as, required arguments and server status.",
            rows.len()
        )
    }

    /// Finds the one tool for `query` across every server whose tools are known, and (with `auto_activate`) starts its
    /// server so the tool appears in the client's list.
    pub async fn find_tool(
        &self,
        query: &str,
        limit: usize,
        auto_activate: bool,
    ) -> Result<FindOutcome> {
        self.find_tool_for(query, limit, auto_activate, None).await
    }

    /// [`App::find_tool`] among the tools `principal` may see (issue 30): a hidden server's tools are never found.
    pub async fn find_tool_for(
        &self,
        query: &str,
        limit: usize,
        auto_activate: bool,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Result<FindOutcome> {
        self.find_tool_in(query, limit, auto_activate, principal, None)
            .await
    }

    /// [`App::find_tool_for`] within a profile: ranked among the profile's tools only (its own search scope, as if
    /// the registry held only them); never a tool outside it, and no agent (agents are not in profiles).
    pub async fn find_tool_in(
        &self,
        query: &str,
        limit: usize,
        auto_activate: bool,
        principal: Option<&ad_core::identity::Principal>,
        profile: Option<&ad_core::profile::Profile>,
    ) -> Result<FindOutcome> {
        let within = profile.map(|p| self.profile_scope(p)).transpose()?;
        // An agent's skill is looked up while the query is embedded.
        let (mut ranking, skill) = self
            .search
            .rank_within(query, limit.clamp(1, 50), within.as_deref(), || {
                profile
                    .is_none()
                    .then(|| self.agents.best_skill(query))
                    .flatten()
            })
            .await?;
        ranking.hits.retain(|h| {
            profile.is_none_or(|p| p.allows(&h.tool.server, Some(&h.tool.name)))
                && self
                    .proxy
                    .visible_to(principal, &h.tool.server, Some(&h.tool.name))
        });
        // Stored tools of a stopped server may predate its filter: a filtered tool is never found.
        let mut filters = std::collections::HashMap::new();
        ranking.hits.retain(|h| {
            filters
                .entry(h.tool.server_id)
                .or_insert_with(|| self.registry.tool_filter(h.tool.server_id).ok())
                .as_ref()
                .is_some_and(|f| f.allows(&h.tool.name))
        });
        // Within a profile, each tool as the profile shows it (its own overrides, `profile_overrides.rs`).
        if let Some(p) = profile.filter(|p| !p.overrides.is_null()) {
            for h in &mut ranking.hits {
                self.record_in_profile(p, &mut h.tool);
            }
        }
        let top_score = ranking.hits.first().map(|h| h.score).unwrap_or(0.0);
        // One index: an agent's skill that covers the query better than the best tool answers instead (#15).
        if let Some(m) = skill
            && m.score >= crate::search::NO_MATCH
            && m.score > top_score
        {
            let other_matches = ranking
                .hits
                .iter()
                .take(3)
                .map(|h| {
                    serde_json::json!({
                        "call_as": crate::proxy::names::expose(&h.tool.server, &h.tool.name),
                        "server": h.tool.server, "tool": h.tool.name, "score": round2(h.score),
                    })
                })
                .collect();
            return Ok(FindOutcome::Agent {
                found: true,
                kind: "agent",
                score: round2(m.score),
                call_as: "sessions_create",
                call: serde_json::json!({"tool": "sessions_create", "arguments": {"agentId": m.agent}}),
                next_step: format!(
                    "this is an agent, not a tool: call `sessions_create` with agentId `{}`, then `sessions_prompt` \
                     (or `tasks_delegate` in one call)",
                    m.agent
                ),
                agent: m.agent,
                skill: m.skill,
                description: m.description,
                agent_status: m.status,
                other_matches,
            });
        }
        let Some(best) = ranking
            .hits
            .first()
            .filter(|_| top_score >= crate::search::NO_MATCH)
        else {
            // In a profile: its own tools are what is known.
            let known = match &within {
                Some(w) => w.len() as i64,
                None => self.registry.store().count_tools()?,
            };
            let hint = if known == 0 {
                "no tools are known yet: install servers and activate them once so their tools are indexed".to_owned()
            } else {
                format!(
                    "no tool among {known} known tools fits this query well; rephrase it, or browse the marketplace for a server that has such a tool"
                )
            };
            return Ok(FindOutcome::NotFound {
                found: false,
                top_score: round2(top_score),
                hint,
            });
        };
        // Catalog entries (introspected, not installed) are found like the rest but never started from here.
        let mut catalog = std::collections::HashMap::new();
        let mut install_info = |server_id: i64| -> Option<serde_json::Value> {
            catalog
                .entry(server_id)
                .or_insert_with(|| {
                    let server = self.registry.get_by_id(server_id).ok()?;
                    if server.installed {
                        return None;
                    }
                    Some(
                        crate::catalog::install_info(self, &server)
                            .ok()
                            .flatten()
                            .map(brief_install)
                            .unwrap_or_else(|| serde_json::json!({})),
                    )
                })
                .clone()
        };
        let best_install = install_info(best.tool.server_id);
        let call_as = crate::proxy::names::expose(&best.tool.server, &best.tool.name);
        let (required_args, optional_count) =
            crate::search::compact_schema(&best.tool.input_schema);
        let required_args = brief_args(required_args);
        let mut activation_error = None;
        let mut auth_url = self
            .registry
            .get(&best.tool.server)
            .ok()
            .and_then(|s| self.oauth.auth_url(s.id));
        let next_step = if let Some(info) = &best_install {
            let secrets = info["required_secrets"]
                .as_array()
                .filter(|a| !a.is_empty())
                .map(|a| {
                    format!(
                        " (it needs {})",
                        a.iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
                .unwrap_or_default();
            format!(
                "`{}` is not installed{secrets}: install it (see `install`) with the user's consent, then call `{call_as}`",
                best.tool.server
            )
        } else if auto_activate {
            match self.proxy.activate(&best.tool.server).await {
                Ok(_) => format!(
                    "call the tool `{call_as}` directly (its server is active), or use registry proxy_call with call_as `{call_as}`"
                ),
                Err(e) => {
                    if let crate::error::Error::AuthRequired { auth_url: url, .. } = &e {
                        auth_url = Some(url.clone());
                    }
                    activation_error = Some(e.to_string());
                    format!(
                        "its server `{}` failed to start; fix that (see activation_error), then activate it",
                        best.tool.server
                    )
                }
            }
        } else if self.proxy.is_active(&best.tool.server) {
            format!("call registry proxy_call with call_as `{call_as}` and the arguments")
        } else {
            format!(
                "activate `{}` (registry activate) or set auto_activate, then call `{call_as}`",
                best.tool.server
            )
        };
        // The other matches name their tool; each server's state (and a catalog entry's install block) is said once.
        let mut servers = serde_json::Map::new();
        let other_matches = ranking.hits[1..]
            .iter()
            .map(|h| {
                let install = install_info(h.tool.server_id);
                let (required, _) = crate::search::compact_schema(&h.tool.input_schema);
                let required: Vec<&serde_json::Value> =
                    required.iter().filter_map(|a| a.get("name")).collect();
                let mut m = serde_json::json!({
                    "call_as": crate::proxy::names::expose(&h.tool.server, &h.tool.name),
                    "score": round2(h.score),
                    "description": brief(&h.tool.description, OTHER_DESCRIPTION),
                    "required_args": required,
                });
                let findings = if install.is_some() {
                    self.catalog_findings(&h.tool, true)
                } else {
                    self.served_warnings(&h.tool, true)
                };
                if let Some(f) = findings {
                    m["findings"] = f;
                }
                if h.tool.server != best.tool.server && !servers.contains_key(&h.tool.server) {
                    let mut state =
                        serde_json::json!({"status": self.proxy.state_of(&h.tool.server)});
                    // The marketplace's alternative (the newest version) and the version are given for the best
                    // match only.
                    if let Some(mut i) = install {
                        if let Some(o) = i.as_object_mut() {
                            o.remove("marketplace_install");
                            o.remove("version");
                        }
                        state["install"] = i;
                    }
                    servers.insert(h.tool.server.clone(), state);
                }
                m
            })
            .collect();
        Ok(FindOutcome::Found {
            found: true,
            confidence: ranking.confidence,
            score: round2(best.score),
            call_as,
            server: best.tool.server.clone(),
            tool: best.tool.name.clone(),
            description: brief(&best.tool.description, BEST_DESCRIPTION),
            required_args,
            optional_count,
            next_step,
            server_status: self.proxy.state_of(&best.tool.server),
            activation_error,
            auth_url,
            other_matches,
            servers,
            installed: best_install.is_none(),
            findings: match best_install {
                Some(_) => self.catalog_findings(&best.tool, false),
                None => self.served_warnings(&best.tool, false),
            },
            install: best_install,
        })
    }
}
