//! A profile's own tool overrides on the proxy's paths (`ad_registry::profile_overrides`): a profile's tool list
//! shows its tools as the profile overrides them, and a call made through the profile by the name it shows is turned
//! back into the server's (the name the server's listing shows, the profile's fixed values and hidden defaults merged
//! in) before anything else looks at it. What is applied is what was approved with the tool's pin.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Map, Value};

use ad_core::error::{Error, Result};
use ad_core::profile::Profile;
use ad_registry::profile_overrides::ProfileLayer;

use crate::caller::Caller;
use crate::names;
use crate::state::Proxy;

type Args = Option<Map<String, Value>>;

impl Proxy {
    /// The approved overrides of `server`'s tools when `profile` sets any on them (checked on the profile first, so
    /// a profile without overrides costs nothing).
    pub fn profile_layer(&self, profile: &Profile, server: &str) -> Option<Arc<ProfileLayer>> {
        profile.overrides.get(server)?;
        self.inner
            .registry
            .profile_layer(server)
            .filter(|l| l.has(&profile.name))
    }

    /// The tools `principal` may see within `profile`, as the profile shows them, by their exposed names.
    pub fn tools_in_profile(
        &self,
        principal: Option<&ad_core::identity::Principal>,
        profile: &Profile,
    ) -> Vec<Tool> {
        let mut out = Vec::new();
        for (server, tools) in self.listed(Tool::clone) {
            if !self.visible_to(principal, &server, None) {
                continue;
            }
            let layer = self.profile_layer(profile, &server);
            for t in tools {
                if !profile.allows(&server, Some(&t.name))
                    || !self.visible_to(principal, &server, Some(&t.name))
                {
                    continue;
                }
                let mut t = match layer.as_ref().and_then(|l| l.shown(&profile.name, &t.name)) {
                    Some(shown) => {
                        let mut s = shown.tool.clone();
                        s.meta = t.meta;
                        s
                    }
                    None => t,
                };
                t.name = names::expose(&server, &t.name).into();
                crate::tools::expose_app_resource(&server, &mut t);
                out.push(t);
            }
        }
        out
    }

    /// [`Proxy::exposed_tools_for`] as a caller sees them: within its profile, by the names it shows.
    pub fn exposed_tools_of(&self, caller: &Caller) -> Vec<(String, String, String)> {
        let Some(profile) = caller.profile.as_deref() else {
            return self.exposed_tools_for(caller.principal.as_deref());
        };
        let mut out = Vec::new();
        for (server, tools) in self.listed(|t| t.name.to_string()) {
            let layer = self.profile_layer(profile, &server);
            for tool in tools {
                if !profile.allows(&server, Some(&tool))
                    || !self.visible_to(caller.principal.as_deref(), &server, Some(&tool))
                {
                    continue;
                }
                let tool = match layer.as_ref().and_then(|l| l.shown(&profile.name, &tool)) {
                    Some(shown) => shown.tool.name.to_string(),
                    None => tool,
                };
                let exposed = names::expose(&server, &tool);
                out.push((server.clone(), tool, exposed));
            }
        }
        out
    }

    /// The running tool a profile's clients call `tool` of `server` (as the profile shows it), and the name the
    /// server's listing shows it by.
    pub fn profile_tool(
        &self,
        profile: &Profile,
        server: &str,
        tool: &str,
    ) -> Option<(Tool, String)> {
        let (server_name, shown) = match self
            .profile_layer(profile, server)
            .and_then(|l| l.called(&profile.name, tool).cloned())
        {
            Some(s) => (s.applied.tool.clone(), Some(s)),
            None => (tool.to_owned(), None),
        };
        let live = self.server_tool(server, &server_name)?;
        let tool = match shown {
            Some(s) => {
                let mut t = s.tool.clone();
                t.meta = live.meta;
                t
            }
            None => live,
        };
        Some((tool, server_name))
    }

    /// A call made through the caller's profile, by the name the profile shows, as the server's listing knows it:
    /// its name there and its arguments with the profile's fixed values and hidden defaults. A parameter the profile
    /// fixes or hides and the call passes anyway is refused, naming it; the server's name of a tool the profile
    /// renames is unknown within the profile.
    pub(crate) fn profile_inbound<'a>(
        &self,
        caller: &Caller,
        server: &str,
        tool: &'a str,
        args: Args,
    ) -> Result<(Cow<'a, str>, Args)> {
        let Some(profile) = caller.profile.as_deref() else {
            return Ok((Cow::Borrowed(tool), args));
        };
        let Some(layer) = self.profile_layer(profile, server) else {
            return Ok((Cow::Borrowed(tool), args));
        };
        if let Some(shown) = layer.called(&profile.name, tool) {
            let args = shown.applied.arguments(args)?;
            return Ok((Cow::Owned(shown.applied.tool.clone()), args));
        }
        if layer.shown(&profile.name, tool).is_some() {
            return Err(Error::not_found("tool", format!("{server}__{tool}")));
        }
        Ok((Cow::Borrowed(tool), args))
    }
}
