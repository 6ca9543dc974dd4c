//! `ChildClient`: our rmcp client handler for one child. Follows the child's list changes, routes its progress
//! notifications to the caller, its log messages and resource updates to clients, and forwards its sampling, elicitation and roots requests to a connected client.

use std::sync::Arc;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};

use crate::held::store::Step;
use crate::state::{Child, ChildClient, Inner};

impl Inner {
    /// Opens a `subscriptions/listen` stream to a 2026-07-28 child for the list changes it declares, and follows
    /// them as a legacy child's notifications are followed; ends with the child's connection.
    pub(super) fn follow_list_changes(self: &Arc<Self>, child: &Arc<Child>) {
        let caps = &child.capabilities;
        let mut filter = SubscriptionFilter::default();
        if caps
            .tools
            .as_ref()
            .is_some_and(|t| t.list_changed == Some(true))
        {
            filter.tools_list_changed = Some(true);
        }
        if caps
            .prompts
            .as_ref()
            .is_some_and(|p| p.list_changed == Some(true))
        {
            filter.prompts_list_changed = Some(true);
        }
        if caps
            .resources
            .as_ref()
            .is_some_and(|r| r.list_changed == Some(true))
        {
            filter.resources_list_changed = Some(true);
        }
        if filter == SubscriptionFilter::default() {
            return;
        }
        let (peer, server, inner) = (child.peer.clone(), child.name.clone(), Arc::downgrade(self));
        tokio::spawn(async move {
            let mut sub = match peer.listen(filter).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%server, error = %e, "subscriptions/listen refused");
                    return;
                }
            };
            while let Ok(Some(notification)) = sub.next().await {
                let Some(inner) = inner.upgrade() else { return };
                match notification {
                    ServerNotification::ToolListChangedNotification(_) => {
                        inner.refresh_tools(&server).await
                    }
                    ServerNotification::PromptListChangedNotification(_)
                    | ServerNotification::ResourceListChangedNotification(_) => {
                        inner.events.emit(ad_core::events::Event::ToolsChanged {
                            name: server.clone(),
                        })
                    }
                    _ => {}
                }
            }
        });
    }
}

impl ChildClient {
    /// When a 2026-07-28 client's request to this child is in flight, the child's request goes to it as an
    /// input-required result (`held.rs`) and its answer comes back here; `None` when there is no such request.
    async fn ask_held<T: serde::de::DeserializeOwned>(
        &self,
        request: InputRequest,
    ) -> Option<Result<T, McpError>> {
        let inner = self.proxy.upgrade()?;
        // The call this request is about may still be registering its caller (`call.rs`).
        inner.registered().await;
        // A 2026-07-28 client's fast-lane call becomes an exchange now, as the normal path runs it (`relay/handover.rs`);
        // a child started with a user's own keys has no lane, and its exchanges are filed apart (`personal.rs`).
        let lane = match self.personal {
            None => inner.hand_over_lane_call(&self.server),
            Some(_) => None,
        };
        let asking = match lane {
            Some(asking) => asking,
            None => {
                // A parked exchange takes the request only when no other call of the child is in flight: a legacy
                // client's call after a 2026-07-28 client left an exchange parked gets its own child's questions.
                let route = self.route();
                let parked_ok = !inner.plain_call_in_flight(&route);
                inner.held.asking_for(&route, parked_ok)?
            }
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        asking.send(Step::Ask { request, reply }).await.ok()?;
        Some(match answer.await {
            Ok(Ok(v)) => serde_json::from_value(v)
                .map_err(|e| McpError::invalid_params(format!("the client's answer: {e}"), None)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(McpError::invalid_request(
                format!(
                    "agent-discover holds no answer for `{}`: the client's request ended before it answered",
                    self.server
                ),
                None,
            )),
        })
    }

    fn refused(&self, what: &str, why: &str) -> McpError {
        McpError::invalid_request(
            format!(
                "agent-discover cannot forward the {what} request of `{}`: {why}",
                self.server
            ),
            None,
        )
    }
}

#[allow(deprecated)] // sampling and roots are deprecated by SEP-2577, but legacy children still send them.
impl ClientHandler for ChildClient {
    fn get_info(&self) -> ClientConfig {
        child_client_config()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.proxy.upgrade() {
            let server = self.server.clone();
            // Re-listing needs the same connection this notification came in on, so it runs outside the handler.
            tokio::spawn(async move { inner.refresh_tools(&server).await });
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.proxy.upgrade() {
            inner.events.emit(ad_core::events::Event::ToolsChanged {
                name: self.server.clone(),
            });
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.proxy.upgrade() {
            inner.events.emit(ad_core::events::Event::ToolsChanged {
                name: self.server.clone(),
            });
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(inner) = self.proxy.upgrade() {
            // A child started with a user's own keys: its messages go to that user's calls only (`personal.rs`).
            if self.personal.is_some() {
                inner
                    .forward_personal_log(&self.route(), params, self.logs_counted)
                    .await;
                return;
            }
            inner
                .forward_log(&self.server, params, self.logs_counted)
                .await;
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(inner) = self.proxy.upgrade() {
            inner
                .forward_resource_updated(&self.server, params, None)
                .await;
        }
    }

    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(inner) = self.proxy.upgrade() {
            if self.legacy_session {
                params.progress_token = crate::state::legacy_token(&params.progress_token);
            }
            if let Some(user) = &self.personal {
                params.progress_token = crate::personal::user_token(user, &params.progress_token);
            }
            inner.route_progress(&self.server, params).await;
        }
    }

    /// SEP-2663 `notifications/tasks`: to the session that created the task (`tasks.rs`).
    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(inner) = self.proxy.upgrade() {
            inner.route_task_status(&self.server, params).await;
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let held = InputRequest::CreateMessage(CreateMessageRequest::new(params.clone()));
        if let Some(answer) = self.ask_held(held).await {
            return answer;
        }
        let inner = self
            .proxy
            .upgrade()
            .ok_or_else(|| self.refused("sampling", "shutting down"))?;
        let peer = self
            .asked_client(&inner, |caps| caps.sampling.is_some())
            .ok_or_else(|| {
                self.refused(
                    "sampling",
                    "no connected client declared the sampling capability",
                )
            })?;
        peer.create_message(params)
            .await
            .map_err(|e| self.refused("sampling", &e.to_string()))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let held = InputRequest::Elicitation(ElicitRequest::new(request.clone()));
        if let Some(answer) = self.ask_held(held).await {
            return answer;
        }
        let inner = self
            .proxy
            .upgrade()
            .ok_or_else(|| self.refused("elicitation", "shutting down"))?;
        let peer = self
            .asked_client(&inner, |caps| caps.elicitation.is_some())
            .ok_or_else(|| {
                self.refused(
                    "elicitation",
                    "no connected client declared the elicitation capability",
                )
            })?;
        peer.create_elicitation(request)
            .await
            .map_err(|e| self.refused("elicitation", &e.to_string()))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        if let Some(answer) = self
            .ask_held(InputRequest::ListRoots(Default::default()))
            .await
        {
            return answer;
        }
        let inner = self
            .proxy
            .upgrade()
            .ok_or_else(|| self.refused("roots", "shutting down"))?;
        let peer = self
            .asked_client(&inner, |caps| caps.roots.is_some())
            .ok_or_else(|| {
                self.refused("roots", "no connected client declared the roots capability")
            })?;
        peer.list_roots()
            .await
            .map_err(|e| self.refused("roots", &e.to_string()))
    }
}

/// What agent-discover says of itself to a child: its client info and capabilities (the 2026-07-28 envelope of a
/// request to a 2026-07-28 child carries them, `ChildLane::envelope_for`).
#[allow(deprecated)] // sampling and roots are deprecated by SEP-2577, but legacy children still send them.
pub(crate) fn child_client_config() -> ClientConfig {
    let caps = ClientCapabilities::builder()
        .enable_roots()
        .enable_sampling()
        .enable_elicitation()
        .build();
    ClientConfig::new(
        caps,
        Implementation::new("agent-discover", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}
