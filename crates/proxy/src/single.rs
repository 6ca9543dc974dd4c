//! One registered server as itself, for the per-server endpoints: its own tool and prompt names, its resource URIs
//! unchanged, its capabilities and instructions; the server is activated on first use.

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, Resource, ResourceTemplate, ResultType,
    ServerPeerInfo, Tool,
};

use rmcp::{ErrorData, ServiceError};

use ad_core::error::{Error, Result};

use crate::caller::Caller;
use crate::names;
use crate::state::Proxy;
use crate::sync::lock;

type ServerResult<T> = std::result::Result<T, ServerError>;

impl Proxy {
    /// Activates `name` unless it is running (a crashed child is restarted by the next call).
    pub async fn ensure_active(&self, name: &str) -> Result<()> {
        if self.is_active(name) {
            return Ok(());
        }
        self.activate(name).await.map(|_| ())
    }

    /// What the running child said about itself at initialize (capabilities, server info, instructions).
    pub fn server_info(&self, name: &str) -> Option<ServerPeerInfo> {
        let child = self.inner.running(name)?;
        child.peer.peer_info().map(|i| (*i).clone())
    }

    /// A running child's tool under its own name (no start, no I/O).
    pub fn server_tool(&self, name: &str, tool: &str) -> Option<Tool> {
        let child = self.inner.running(name)?;
        lock(&child.tools).iter().find(|t| t.name == tool).cloned()
    }

    /// The child's tools under their own names.
    pub async fn server_tools(&self, name: &str) -> Result<Vec<Tool>> {
        let child = self.inner.ready_child(name).await?;
        Ok(lock(&child.tools).clone())
    }

    pub async fn server_resources(&self, name: &str) -> ServerResult<Vec<Resource>> {
        let child = self.inner.ready_child(name).await?;
        if child.capabilities.resources.is_none() {
            return Ok(vec![]);
        }
        child
            .peer
            .list_all_resources()
            .await
            .map_err(|e| upstream(name, e))
    }

    pub async fn server_resource_templates(
        &self,
        name: &str,
    ) -> ServerResult<Vec<ResourceTemplate>> {
        let child = self.inner.ready_child(name).await?;
        if child.capabilities.resources.is_none() {
            return Ok(vec![]);
        }
        let items = child
            .peer
            .list_all_resource_templates()
            .await
            .map_err(|e| upstream(name, e))?;
        Ok(self
            .inner
            .gate(&child, ad_scan::Kind::ResourceTemplate, items))
    }

    /// `resources/read` of the child's own URI; a legacy child's requests during the read are minted into
    /// input-required results for a 2026-07-28 caller (`held.rs`).
    pub async fn server_read_resource(
        &self,
        name: &str,
        uri: &str,
        caller: &Caller,
    ) -> ServerResult<ReadResourceResponse> {
        let child = self.inner.ready_child(name).await?;
        if caller.mints_for(&child) {
            return match self.read_minting(&child, uri, caller).await {
                Ok(ReadResourceResponse::Complete(mut r)) => {
                    r.result_type.get_or_insert(ResultType::COMPLETE);
                    self.inner.verify_skill_read(name, uri, &r.contents)?;
                    self.inner
                        .guard_resource(name, child.server_id, uri, &mut r);
                    Ok(r.into())
                }
                Ok(other) => Ok(other),
                Err(e) => Err(e.into()),
            };
        }
        let mut params = ReadResourceRequestParams::new(uri);
        crate::call::name_user(&mut params.meta, &child, caller);
        let mut res = child
            .peer
            .read_resource(params)
            .await
            .map_err(|e| upstream(name, e))?;
        res.result_type.get_or_insert(ResultType::COMPLETE);
        // A skill file whose manifest entry was handed on is verified before it is (`skills.rs`).
        self.inner.verify_skill_read(name, uri, &res.contents)?;
        self.inner
            .guard_resource(name, child.server_id, uri, &mut res);
        Ok(res.into())
    }

    pub async fn server_prompts(&self, name: &str) -> ServerResult<Vec<Prompt>> {
        let child = self.inner.ready_child(name).await?;
        if child.capabilities.prompts.is_none() {
            return Ok(vec![]);
        }
        let items = child
            .peer
            .list_all_prompts()
            .await
            .map_err(|e| upstream(name, e))?;
        Ok(self.inner.gate(&child, ad_scan::Kind::Prompt, items))
    }

    /// `prompts/get` of the child's own prompt; `request` carries the client's arguments and, on the retry of an
    /// input-required result, its answers and the echoed state (passed on untouched).
    pub async fn server_get_prompt(
        &self,
        name: &str,
        mut request: GetPromptRequestParams,
        caller: &Caller,
    ) -> ServerResult<GetPromptResponse> {
        let child = self.inner.ready_child(name).await?;
        // A prompt the scanner withholds is not got, on this endpoint either.
        if let Ok(items) = child.peer.list_all_prompts().await
            && let Some(p) = items.iter().find(|p| p.name == request.name)
        {
            self.inner.gate_one(&child, ad_scan::Kind::Prompt, p)?;
        }
        let prompt = request.name.clone();
        // The messages pass the result guards (`callguard/flows.rs`).
        let guard = |mut res: GetPromptResponse| {
            self.inner
                .guard_prompt(name, child.server_id, &prompt, &mut res);
            res
        };
        if caller.mints_for(&child) {
            return self
                .prompt_minting(&child, request, caller)
                .await
                .map(guard)
                .map_err(Into::into);
        }
        request.meta = None;
        crate::call::name_user(&mut request.meta, &child, caller);
        let res = child
            .peer
            .get_prompt_once(request)
            .await
            .map_err(|e| upstream(name, e))?;
        Ok(guard(complete_prompt(res)))
    }

    pub async fn server_complete(
        &self,
        name: &str,
        mut params: CompleteRequestParams,
    ) -> ServerResult<CompleteResult> {
        let child = self.inner.ready_child(name).await?;
        params.meta = None;
        let mut res = child
            .peer
            .complete(params)
            .await
            .map_err(|e| upstream(name, e))?;
        // A legacy child's result has no resultType; a 2026-07-28 client requires one.
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// The exposed URI under which a per-server client's subscription is kept (shared with aggregated clients).
    pub fn exposed_uri(name: &str, uri: &str) -> String {
        names::expose_uri(name, uri)
    }
}

/// A legacy child's prompt has no `resultType`; a 2026-07-28 client requires one.
pub(super) fn complete_prompt(res: GetPromptResponse) -> GetPromptResponse {
    match res {
        GetPromptResponse::Complete(mut r) => {
            r.result_type.get_or_insert(ResultType::COMPLETE);
            GetPromptResponse::Complete(r)
        }
        other => other,
    }
}

/// A failure of a per-server request: the proxy's own, or the child's JSON-RPC error, passed on unchanged.
#[derive(Debug)]
pub enum ServerError {
    Proxy(Error),
    Child(ErrorData),
}

impl From<Error> for ServerError {
    /// A child's JSON-RPC error (or a refused `requestState`, shaped as one) is passed on as it is.
    fn from(e: Error) -> Self {
        match e {
            Error::Child { error, .. } => ServerError::Child(*error),
            e => ServerError::Proxy(e),
        }
    }
}

fn upstream(server: &str, e: ServiceError) -> ServerError {
    match e {
        ServiceError::McpError(data) => ServerError::Child(data),
        e => ServerError::Proxy(Error::Upstream {
            server: server.to_owned(),
            message: e.to_string(),
        }),
    }
}
