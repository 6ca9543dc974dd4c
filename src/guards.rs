//! The guards-on-calls use cases: show the global settings, a server's own and what applies to its calls (with the
//! decisions counted since this process started), and change a server's own. What the fronts call
//! (`agent-discover guards`, `GET`/`PUT /api/servers/{id}/guards`, the `registry` tool's `guards` action); the
//! settings are stored by `ad_registry::guards` and applied by the proxy (`ad_proxy::callguard`).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use ad_core::error::{Error, Result};
pub use ad_core::guards::{GuardSettings, Guards, Mode};

/// A change to a server's own guard settings: each field present is `off`, `warn`, `block`, or `default` (follow
/// the global setting again).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardsPatch {
    pub arguments: Option<String>,
    pub result_secrets: Option<String>,
    pub result_instructions: Option<String>,
}

impl GuardsPatch {
    pub fn is_empty(&self) -> bool {
        self.arguments.is_none()
            && self.result_secrets.is_none()
            && self.result_instructions.is_none()
    }
}

/// `off`, `warn`, `block` or `default` (`None`: follow the global setting).
fn parse(field: &'static str, v: &str) -> Result<Option<Mode>> {
    if v.trim().eq_ignore_ascii_case("default") {
        return Ok(None);
    }
    v.parse::<Mode>().map(Some).map_err(|_| {
        Error::invalid(
            field,
            format!("`{v}` is not a guard setting: use off, warn, block or default"),
        )
    })
}

/// One setting in a change: its name, the value asked for, the server's own (to change), what applies now, the
/// global one.
type Setting<'a> = (
    &'static str,
    &'a Option<String>,
    &'a mut Option<Mode>,
    Mode,
    Mode,
);

fn rank(m: Mode) -> u8 {
    match m {
        Mode::Off => 0,
        Mode::Warn => 1,
        Mode::Block => 2,
    }
}

impl App {
    /// The guards: `{global, server?, own?, effective?, counts}`; with a server, its own settings, what applies to
    /// its calls and its counts; without, every server's counts.
    pub fn guards_view(&self, name: Option<&str>) -> Result<Value> {
        let global = self.proxy.guards();
        let counts = self.proxy.guard_counts();
        let Some(name) = name else {
            return Ok(json!({"global": global, "counts": counts}));
        };
        let s = self.registry.get(name)?;
        let own = self.registry.guard_settings(s.id)?;
        Ok(json!({
            "global": global,
            "server": s.name,
            "own": own,
            "effective": global.with(&own),
            "counts": counts.get(&s.name).cloned().unwrap_or_default(),
        }))
    }

    /// Changes a server's own guard settings (the fields `patch` has) and answers the new view. With
    /// `tighten_only` (an agent's change through the `registry` tool), a setting may only become stricter than what
    /// applies now: an agent must not switch off the guard that stops it.
    pub fn set_guards(&self, name: &str, patch: GuardsPatch, tighten_only: bool) -> Result<Value> {
        let s = self.registry.get(name)?;
        let mut own = self.registry.guard_settings(s.id)?;
        let global = self.proxy.guards();
        let effective: Guards = global.with(&own);
        let fields: [Setting<'_>; 3] = [
            (
                "arguments",
                &patch.arguments,
                &mut own.arguments,
                effective.arguments,
                global.arguments,
            ),
            (
                "result_secrets",
                &patch.result_secrets,
                &mut own.result_secrets,
                effective.result_secrets,
                global.result_secrets,
            ),
            (
                "result_instructions",
                &patch.result_instructions,
                &mut own.result_instructions,
                effective.result_instructions,
                global.result_instructions,
            ),
        ];
        for (field, wanted, slot, now, global) in fields {
            let Some(wanted) = wanted else { continue };
            let wanted = parse(field, wanted)?;
            let after = wanted.unwrap_or(global);
            if tighten_only && rank(after) < rank(now) {
                return Err(Error::invalid(
                    field,
                    format!(
                        "an agent may only make a guard stricter ({field} is {now} for `{}`); a person loosens it with \
                         `agent-discover guards {} --{} {after}`",
                        s.name,
                        s.name,
                        field.replace('_', "-"),
                    ),
                ));
            }
            *slot = wanted;
        }
        self.registry.set_guard_settings(&s.name, own)?;
        self.guards_view(Some(&s.name))
    }
}
