//! A failed proxied call as agents get it (SEP-1303): the failure body the MCP fronts' tool error results and a
//! script's errors share, with the tools named like the one that failed (`did_you_mean`) among those the caller
//! may see.

use serde_json::{Value, json};

use ad_core::error::Error;

use crate::names;
use crate::state::Proxy;

impl Proxy {
    /// A failed proxied call as agents get it (SEP-1303): `{error, code, kind, server, tool, did_you_mean}`, with the
    /// scanner's `reasons`, an `authUrl`, the `approval` id and who denied it where there are; `kind: input_required`
    /// (and what is `needs`) for a call that needs input its caller cannot give. The MCP fronts' tool error results and
    /// a script's errors (`details`) alike.
    pub fn failure_body(&self, server: &str, tool: &str, e: &Error) -> Value {
        self.failure_body_for(server, tool, e, None)
    }

    /// [`Proxy::failure_body`] whose suggestions are only tools `principal` may see (`visibility.rs`).
    pub fn failure_body_for(
        &self,
        server: &str,
        tool: &str,
        e: &Error,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Value {
        let did_you_mean = self.did_you_mean_for(&names::expose(server, tool), 3, principal);
        if let Error::InputRequired { what, .. } = e {
            return json!({
                "error": e.to_string(),
                "code": e.code().as_str(),
                "kind": "input_required",
                "needs": what,
                "server": server,
                "tool": tool,
                "did_you_mean": did_you_mean,
            });
        }
        // Withheld tools (`tool_changed`, `tool_flagged`) and #27's `approval_denied` / `approval_timeout` are kept
        // apart; everything else is seed 001's kind.
        let mut body = json!({
            "error": e.to_string(),
            "code": e.code().as_str(),
            "kind": e.call_kind(),
            "server": server,
            "tool": tool,
            "did_you_mean": did_you_mean,
        });
        if let Some(reasons) = e.reasons() {
            body["reasons"] = json!(reasons);
        }
        if let Error::AuthRequired { auth_url, .. } = e {
            body["authUrl"] = json!(auth_url);
        }
        if let Error::ApprovalDenied {
            approval: Some(id), ..
        }
        | Error::ApprovalTimeout {
            approval: Some(id), ..
        } = e
        {
            body["approval"] = json!(id);
        }
        if let Error::ApprovalDenied { by, .. } = e {
            body["denied_by"] = json!(by);
        }
        crate::callguard::describe_refusal(e, &mut body);
        if let Some(ms) = e.retry_after_ms() {
            body["retry_after_ms"] = json!(ms);
        }
        if let Error::PolicyDenied { policy, reason, .. } = e {
            body["policy"] = json!(policy);
            body["reason"] = json!(reason);
        }
        body
    }

    /// Tool names similar to `name` across every known server (stored catalog), best first.
    pub fn did_you_mean(&self, name: &str, limit: usize) -> Vec<Value> {
        self.did_you_mean_for(name, limit, None)
    }

    /// [`Proxy::did_you_mean`] among the tools `principal` may see (`visibility.rs`).
    pub fn did_you_mean_for(
        &self,
        name: &str,
        limit: usize,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Vec<Value> {
        let wanted = names::strip_mcp(name);
        let wanted_tool = wanted.rsplit("__").next().unwrap_or(wanted);
        let Ok(servers) = self.inner.registry.list(&Default::default()) else {
            return vec![];
        };
        let mut scored: Vec<(f64, Value)> = Vec::new();
        for s in servers {
            if !self.visible_to(principal, &s.server.name, None) {
                continue;
            }
            let Ok(tools) = self.inner.registry.tools(s.server.id) else {
                continue;
            };
            // Filtered tools are never suggested.
            let Ok(filter) = self.inner.registry.tool_filter(s.server.id) else {
                continue;
            };
            for t in tools {
                let exposed = names::expose(&s.server.name, &t.name);
                if exposed == wanted
                    || !filter.allows(&t.name)
                    || !self.visible_to(principal, &s.server.name, Some(&t.name))
                {
                    continue;
                }
                let score = names::similarity(wanted, &exposed)
                    .max(names::similarity(wanted_tool, &t.name));
                if score >= 0.3 {
                    scored.push((score, json!({"call_as": exposed, "server": s.server.name, "tool": t.name, "description": t.description, "score": (score * 100.0).round() / 100.0})));
                }
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(limit).map(|(_, v)| v).collect()
    }
}
