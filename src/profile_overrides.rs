//! A profile's own tool overrides, the use cases every front shares (CLI `tools override --profile`, REST
//! `?profile=`, the registry's `tool_override` with `profile`): list, show, set and clear what one profile's clients
//! see of a server's tool, on top of the server's own override. The rule (how it is kept, pinned and applied) is
//! `ad_registry::profile_overrides`; a profile's MCP view applies it (`ad_proxy`'s `profile_view.rs`), and `find_tool`,
//! `get_schema` and `script_api` within a profile show the tool as the profile does ([`App::shown_in_profile`]).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::App;
use crate::profiles::Profile;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_registry::overrides::ToolOverride;
use ad_registry::pinning::canonical;
use ad_registry::profile_overrides::{self as po, FIELD, Shown};

impl App {
    /// Every override `profile` sets (of one server's tools with `server`): `{profile, server, tool, override,
    /// shown_as, call_as, status}` (see [`App::profile_tool_override`]).
    pub fn profile_tool_overrides(
        &self,
        profile: &str,
        server: Option<&str>,
    ) -> Result<Vec<Value>> {
        let p = self.profile(profile)?;
        let all = po::parse(&p.overrides)?;
        let mut out = Vec::new();
        for (s, tools) in &all {
            if server.is_some_and(|x| x != s) {
                continue;
            }
            for (t, o) in tools {
                out.push(self.profile_override_view(&p.name, s, t, o)?);
            }
        }
        Ok(out)
    }

    /// One override of `profile`: the override, the name the profile's clients call the tool by (`call_as`), and
    /// `status`: `approved` (applied), `pending` (the tool is withheld until someone approves it with the override),
    /// `unseen` (the server has not listed its tools since).
    pub fn profile_tool_override(&self, profile: &str, server: &str, tool: &str) -> Result<Value> {
        let p = self.profile(profile)?;
        let o = po::parse(&p.overrides)?
            .get(server)
            .and_then(|t| t.get(tool))
            .cloned()
            .ok_or_else(|| {
                Error::not_found(
                    "tool override",
                    format!("{server}__{tool} in the profile `{profile}`"),
                )
            })?;
        self.profile_override_view(&p.name, server, tool, &o)
    }

    /// Sets (replaces) `profile`'s override of `tool` (its own name) of `server`; an empty override clears it. The
    /// tool is pinned with it, so a running server's tool is withheld until someone approves it.
    pub async fn set_profile_tool_override(
        &self,
        profile: &str,
        server: &str,
        tool: &str,
        o: ToolOverride,
    ) -> Result<Value> {
        if o.is_empty() {
            return self
                .clear_profile_tool_override(profile, server, tool)
                .await;
        }
        o.validate()?;
        let mut p = self.profile(profile)?;
        let s = self.registry.get(server)?;
        if !p.allows(server, None) {
            return Err(Error::invalid(
                "server",
                format!(
                    "`{server}` is not in the profile `{profile}`; add it first (profiles set {profile} --add-server {server})"
                ),
            ));
        }
        self.check_profile_override(&p, s.id, server, tool, &o)?;
        let mut all = po::parse(&p.overrides)?;
        all.entry(server.to_owned())
            .or_default()
            .insert(tool.to_owned(), o.clone());
        p.overrides = to_value(&all);
        self.registry.store().put_profile(&p)?;
        self.profile_overrides_changed(server).await;
        self.profile_override_view(&p.name, server, tool, &o)
    }

    /// Removes `profile`'s override of `tool`; the tool is served within the profile as its server shows it (no
    /// review: nothing new is shown).
    pub async fn clear_profile_tool_override(
        &self,
        profile: &str,
        server: &str,
        tool: &str,
    ) -> Result<Value> {
        let mut p = self.profile(profile)?;
        let mut all = po::parse(&p.overrides)?;
        let cleared = all.get_mut(server).and_then(|t| t.remove(tool)).is_some();
        if cleared {
            all.retain(|_, t| !t.is_empty());
            p.overrides = to_value(&all);
            self.registry.store().put_profile(&p)?;
            self.profile_overrides_changed(server).await;
        }
        Ok(json!({"profile": profile, "server": server, "tool": tool, "cleared": cleared}))
    }

    /// The tool `server_name` of `server` (as the server's listing shows it) as `profile` shows it, when the profile
    /// overrides it and the override is approved.
    pub fn shown_in_profile(
        &self,
        profile: &Profile,
        server: &str,
        server_name: &str,
    ) -> Option<Arc<Shown>> {
        self.proxy
            .profile_layer(profile, server)?
            .shown(&profile.name, server_name)
            .cloned()
    }

    /// A stored tool (a search hit, as the server's listing shows it) as `profile` shows it.
    pub(crate) fn record_in_profile(&self, profile: &Profile, t: &mut crate::model::ToolRecord) {
        if let Some(s) = self.shown_in_profile(profile, &t.server, &t.name) {
            t.name = s.tool.name.to_string();
            t.description = s.tool.description.as_deref().unwrap_or_default().to_owned();
            t.input_schema = Value::Object((*s.tool.input_schema).clone());
        }
    }

    /// A declared tool of `script_api` (as the server's listing shows it) as `profile` shows it.
    pub(crate) fn api_tool_in_profile(&self, profile: &Profile, t: &mut crate::codemode::ApiTool) {
        if let Some(s) = self.shown_in_profile(profile, &t.server, &t.tool) {
            t.tool = s.tool.name.to_string();
            t.exposed = crate::proxy::names::expose(&t.server, &t.tool);
            t.description = s.tool.description.as_deref().map(str::to_owned);
            t.input_schema = Value::Object((*s.tool.input_schema).clone());
        }
    }

    /// `get_schema` of a tool by the name the caller's profile shows: `None` when the profile does not override it
    /// (the usual answer applies), an unknown tool for the server's name of a tool the profile renames.
    pub(crate) fn schema_in_profile(
        &self,
        caller: &crate::proxy::Caller,
        server: &str,
        tool: &str,
    ) -> Option<Result<Value>> {
        let profile = caller.profile.as_deref()?;
        let layer = self.proxy.profile_layer(profile, server)?;
        let not_found = || {
            Error::not_found(
                "tool",
                format!("{server}__{tool} (activate the server once so its tools are known)"),
            )
        };
        if let Some(s) = layer.called(&profile.name, tool) {
            if !self.proxy.visible(caller, server, Some(&s.applied.tool)) {
                return Some(Err(not_found()));
            }
            return Some(Ok(json!({
                "call_as": crate::proxy::names::expose(server, tool), "server": server, "tool": tool,
                "description": s.tool.description.as_deref().unwrap_or_default(),
                "input_schema": Value::Object((*s.tool.input_schema).clone()),
            })));
        }
        layer
            .shown(&profile.name, tool)
            .is_some()
            .then(|| Err(not_found()))
    }

    /// Lists `server`'s tools again after a profile's overrides of them changed (the gate pins the change), or, for
    /// a server not running here, forgets what profiles applied so it is read again from the pins.
    pub(crate) async fn profile_overrides_changed(&self, server: &str) {
        self.registry.forget_profile_layer(server);
        self.events.emit(Event::ServerUpdated {
            name: server.to_owned(),
        });
        self.proxy.relist_tools(server).await;
    }

    /// [`App::profile_overrides_changed`] for every server whose overrides differ between two versions of a profile
    /// (created, imported or removed), in the background when called outside a runtime's task.
    pub(crate) fn profile_changed(&self, before: Option<&Profile>, after: Option<&Profile>) {
        let of = |p: Option<&Profile>| {
            p.and_then(|p| po::parse(&p.overrides).ok())
                .unwrap_or_default()
        };
        let (a, b) = (of(before), of(after));
        let servers: Vec<String> = a
            .keys()
            .chain(b.keys())
            .filter(|s| a.get(*s) != b.get(*s))
            .cloned()
            .collect();
        if servers.is_empty() {
            return;
        }
        for s in &servers {
            self.registry.forget_profile_layer(s);
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let proxy = self.proxy.clone();
            rt.spawn(async move {
                for s in servers {
                    proxy.relist_tools(&s).await;
                }
            });
        }
    }

    /// A profile's overrides are fit to store: each reads and validates; on a registered server, of a tool it has
    /// listed, with parameters the tool shows (after its server's override) and a new name no other tool takes.
    pub(crate) fn check_profile_overrides(&self, p: &Profile) -> Result<()> {
        for (server, tools) in po::parse(&p.overrides)? {
            let s = self.registry.get(&server).map_err(|_| {
                Error::not_found(
                    "server",
                    format!("{server} (named by the profile's overrides; install it first)"),
                )
            })?;
            for (tool, o) in &tools {
                self.check_profile_override(p, s.id, &server, tool, o)?;
            }
        }
        Ok(())
    }

    fn check_profile_override(
        &self,
        p: &Profile,
        server_id: i64,
        server: &str,
        tool: &str,
        o: &ToolOverride,
    ) -> Result<()> {
        let pins: Vec<_> = self
            .registry
            .store()
            .pins_of(server_id)?
            .into_iter()
            .filter(|p| ad_registry::pinning::scan::split_key(&p.tool).0 == ad_scan::Kind::Tool)
            .collect();
        if pins.is_empty() {
            // A server that has not listed its tools: nothing to check them against yet.
            return Ok(());
        }
        let Some(own) = pins.iter().find(|p| p.tool == tool) else {
            let names: Vec<&str> = pins.iter().map(|p| p.tool.as_str()).collect();
            return Err(Error::invalid(
                "tool",
                format!(
                    "`{server}` has no tool `{tool}` (its tools: {}); name a tool by its own name",
                    names.join(", ")
                ),
            ));
        };
        let server_overrides = self.registry.tool_overrides(server_id)?;
        let server_name = |t: &str| -> String {
            server_overrides
                .get(t)
                .and_then(|o| o.name.clone())
                .unwrap_or_else(|| t.to_owned())
        };
        // The parameters the tool shows after its server's override.
        let mut props = own.current_definition["inputSchema"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if let Some(so) = server_overrides.get(tool) {
            props.retain(|k, _| !so.fixed.contains_key(k) && !so.hidden.contains(k));
        }
        crate::overrides::check_parameters(o, &props, &format!("`{tool}` shows"))?;
        if let Some(n) = &o.name
            && *n != server_name(tool)
        {
            let others = po::parse(&p.overrides)?;
            let taken = pins
                .iter()
                .any(|x| x.tool != tool && server_name(&x.tool) == *n)
                || others.get(server).is_some_and(|t| {
                    t.iter()
                        .any(|(x, xo)| x != tool && xo.name.as_deref() == Some(n))
                });
            if taken {
                return Err(Error::Conflict {
                    what: "tool name",
                    name: format!("{server}__{n} in the profile `{}`", p.name),
                });
            }
        }
        Ok(())
    }

    fn profile_override_view(
        &self,
        profile: &str,
        server: &str,
        tool: &str,
        o: &ToolOverride,
    ) -> Result<Value> {
        let pin = self.registry.store().pin(server, tool)?;
        let body = canonical(&serde_json::to_value(o).unwrap_or(Value::Null));
        let pinned = |d: Option<&Value>| {
            d.and_then(|d| d.get(FIELD)).and_then(|f| f.get(profile)) == Some(&body)
        };
        let status = match &pin {
            Some(p) if !p.pending() && pinned(p.approved_definition.as_ref()) => "approved",
            Some(p) if p.pending() && pinned(Some(&p.current_definition)) => "pending",
            _ => "unseen",
        };
        let server_name = match &o.name {
            Some(n) => n.clone(),
            None => self
                .registry
                .get(server)
                .ok()
                .and_then(|s| self.registry.tool_overrides(s.id).ok())
                .and_then(|mut m| m.remove(tool))
                .and_then(|so| so.name)
                .unwrap_or_else(|| tool.to_owned()),
        };
        Ok(json!({
            "profile": profile, "server": server, "tool": tool, "override": serde_json::to_value(o).unwrap_or(Value::Null),
            "shown_as": server_name, "call_as": crate::proxy::names::expose(server, &server_name),
            "status": status,
        }))
    }

    /// [`App::tool_overrides`], or with `profile` that profile's.
    pub fn tool_overrides_in(
        &self,
        profile: Option<&str>,
        server: Option<&str>,
    ) -> Result<Vec<Value>> {
        match profile {
            Some(p) => self.profile_tool_overrides(p, server),
            None => self.tool_overrides(server),
        }
    }

    /// [`App::tool_override`], or with `profile` that profile's.
    pub fn tool_override_in(
        &self,
        profile: Option<&str>,
        server: &str,
        tool: &str,
    ) -> Result<Value> {
        match profile {
            Some(p) => self.profile_tool_override(p, server, tool),
            None => self.tool_override(server, tool),
        }
    }

    /// [`App::set_tool_override`], or with `profile` that profile's.
    pub async fn set_tool_override_in(
        &self,
        profile: Option<&str>,
        server: &str,
        tool: &str,
        o: ToolOverride,
    ) -> Result<Value> {
        match profile {
            Some(p) => self.set_profile_tool_override(p, server, tool, o).await,
            None => self.set_tool_override(server, tool, o).await,
        }
    }

    /// [`App::clear_tool_override`], or with `profile` that profile's.
    pub async fn clear_tool_override_in(
        &self,
        profile: Option<&str>,
        server: &str,
        tool: &str,
    ) -> Result<Value> {
        match profile {
            Some(p) => self.clear_profile_tool_override(p, server, tool).await,
            None => self.clear_tool_override(server, tool).await,
        }
    }

    /// The current override of `tool` (its own name) of `server`: the server's, or with `profile` that profile's
    /// (none: empty), for the CLI's flags to be added to.
    pub fn current_tool_override(
        &self,
        profile: Option<&str>,
        server: &str,
        tool: &str,
    ) -> Result<ToolOverride> {
        Ok(match profile {
            Some(p) => po::parse(&self.profile(p)?.overrides)?
                .get(server)
                .and_then(|t| t.get(tool))
                .cloned()
                .unwrap_or_default(),
            None => {
                let s = self.registry.get(server)?;
                self.registry
                    .tool_overrides(s.id)?
                    .remove(tool)
                    .unwrap_or_default()
            }
        })
    }
}

fn to_value(all: &po::Overrides) -> Value {
    if all.is_empty() {
        return Value::Null;
    }
    serde_json::to_value(all).unwrap_or(Value::Null)
}
