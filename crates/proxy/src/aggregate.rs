//! Resources, resource templates and prompts of every running child, aggregated for clients: resource URIs become
//! `agent-discover://server/uri` and prompts `server__prompt`, so reads and gets route back to their owner.

use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, Prompt, ReadResourceRequestParams,
    ReadResourceResponse, Resource, ResourceContents, ResourceTemplate, ResultType,
};

use std::sync::Arc;

use ad_core::error::{Error, Result};

use crate::caller::Caller;
use crate::failure::child_error;
use crate::names;
use crate::single::complete_prompt;
use crate::state::{Child, Proxy};
use ad_core::identity::Principal;

impl Proxy {
    /// Resources of every running child, their URIs namespaced so reads route back.
    /// Only the servers `principal` may see (`visibility.rs`); all for `None`.
    pub async fn list_resources(&self, principal: Option<&Principal>) -> Vec<Resource> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.resources.is_some()) {
            if !self.visible_to(principal, &child.name, None) {
                continue;
            }
            if let Ok(items) = child.peer.list_all_resources().await {
                for mut r in items {
                    r.uri = names::expose_uri(&child.name, &r.uri);
                    out.push(r);
                }
            }
        }
        out
    }

    pub async fn list_resource_templates(
        &self,
        principal: Option<&Principal>,
    ) -> Vec<ResourceTemplate> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.resources.is_some()) {
            if !self.visible_to(principal, &child.name, None) {
                continue;
            }
            if let Ok(items) = child.peer.list_all_resource_templates().await {
                for mut r in self
                    .inner
                    .gate(&child, ad_scan::Kind::ResourceTemplate, items)
                {
                    r.uri_template = names::expose_uri(&child.name, &r.uri_template);
                    out.push(r);
                }
            }
        }
        out
    }

    /// `resources/read` of an exposed URI; for a 2026-07-28 caller, a legacy child's requests during the read are
    /// minted into input-required results (`held.rs`).
    pub async fn read_resource(&self, uri: &str, caller: &Caller) -> Result<ReadResourceResponse> {
        // A large result kept to be read in pages (`pages.rs`).
        if let Some(page) = self.read_result_uri(uri, caller.principal.as_deref()) {
            return page.map(Into::into);
        }
        let (server, original) =
            names::split_uri(uri).ok_or_else(|| Error::not_found("resource", uri))?;
        // A hidden server's resource is as unknown as one that does not exist.
        if !self.visible(caller, server, None) {
            return Err(Error::not_found("resource", uri));
        }
        let child = self.inner.ready_child(server).await?;
        let res = if caller.mints_for(&child) {
            self.read_minting(&child, original, caller).await?
        } else {
            let mut params = ReadResourceRequestParams::new(original);
            crate::call::name_user(&mut params.meta, &child, caller);
            match child.peer.read_resource(params).await {
                Ok(r) => r.into(),
                Err(e) => {
                    let e = child_error(server, e);
                    return Err(self.inner.user_refusal(&child, caller, e).await);
                }
            }
        };
        let ReadResourceResponse::Complete(mut res) = res else {
            return Ok(res);
        };
        res.result_type.get_or_insert(ResultType::COMPLETE);
        // A skill file whose manifest entry was handed on is verified before it is (`skills.rs`).
        self.inner
            .verify_skill_read(server, original, &res.contents)?;
        self.inner
            .guard_resource(server, child.server_id, original, &mut res);
        for c in &mut res.contents {
            match c {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => {
                    *uri = names::expose_uri(server, uri)
                }
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        Ok(res.into())
    }

    pub async fn list_prompts(&self, principal: Option<&Principal>) -> Vec<Prompt> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.prompts.is_some()) {
            if !self.visible_to(principal, &child.name, None) {
                continue;
            }
            if let Ok(items) = child.peer.list_all_prompts().await {
                for mut p in self.inner.gate(&child, ad_scan::Kind::Prompt, items) {
                    p.name = names::expose(&child.name, &p.name);
                    out.push(p);
                }
            }
        }
        out
    }

    /// `prompts/get` of an exposed prompt `request.name`; on the retry of an input-required result the client's
    /// answers and the echoed state go to the same child untouched.
    pub async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        caller: &Caller,
    ) -> Result<GetPromptResponse> {
        let (child, prompt) = self.find_prompt(&request.name).await?;
        if !self.visible(caller, &child.name, None) {
            return Err(Error::not_found("prompt", &request.name));
        }
        request.name = prompt.clone();
        // The messages pass the result guards (`callguard/flows.rs`).
        let guard = |mut res: GetPromptResponse| {
            self.inner
                .guard_prompt(&child.name, child.server_id, &prompt, &mut res);
            res
        };
        if caller.mints_for(&child) {
            return self
                .prompt_minting(&child, request, caller)
                .await
                .map(guard);
        }
        request.meta = None;
        crate::call::name_user(&mut request.meta, &child, caller);
        match child.peer.get_prompt_once(request).await {
            Ok(res) => Ok(guard(complete_prompt(res))),
            Err(e) => {
                let e = child_error(&child.name, e);
                Err(self.inner.user_refusal(&child, caller, e).await)
            }
        }
    }

    /// The running child offering the exposed prompt `name`, and the prompt's own name.
    pub(super) async fn find_prompt(&self, name: &str) -> Result<(Arc<Child>, String)> {
        for child in self.inner.running_with(|c| c.prompts.is_some()) {
            if let Ok(items) = child.peer.list_all_prompts().await
                && let Some(p) = items
                    .into_iter()
                    .find(|p| names::expose(&child.name, &p.name) == names::strip_mcp(name))
            {
                self.inner.gate_one(&child, ad_scan::Kind::Prompt, &p)?;
                return Ok((child, p.name));
            }
        }
        Err(Error::not_found("prompt", name))
    }
}
