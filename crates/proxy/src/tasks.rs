//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) carried through: a child's task (the
//! `CreateTaskResult` of a `tools/call`, relayed by `call.rs`) stays the child's; `tasks/get`, `tasks/update` and
//! `tasks/cancel` go to the child that owns the task, with the calling client's capabilities in `_meta`; the child's
//! `notifications/tasks` go to the client session that created the task. On a server that takes each user's own
//! credentials (token exchange, per-user authorization; issue 30) a task is its creator's: tasks requests carry the
//! caller's credentials, and another user's request for it is answered "unknown task", as for a task that is not.
//!
//! Task ids: on a per-server endpoint they are the child's own. On the aggregated front they are `server__id` (the
//! tools' naming), so a tasks request routes by its id alone, with no table to keep or lose; the child's ids are its
//! own business (rmcp's are random UUIDs), so the prefix adds no way to reach a task one could not reach directly.
//! Only children of the 2026-07-28 era that declare the extension serve tasks here: a handshake-era child would
//! need the extension declared by us at initialize, for every client at once, whether or not the client takes tasks.

use std::sync::Arc;

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    GetTaskResult, Notification, RequestMetaObject, ServerNotification, ServerResult,
    TaskStatusNotificationParams, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{ErrorData, Peer, RoleServer};

use ad_core::error::{Error, Result};

use crate::caller::Caller;
use crate::names;
use crate::state::{Child, Inner, Owner, Proxy, Slot};
use crate::sync::lock;

/// Owners kept at most (sessions that are gone are dropped first).
const MAX_OWNERS: usize = 4096;
/// Notifications of tasks not (yet) owned kept at most: most belong to tasks of clients that cannot be told.
const MAX_EARLY: usize = 256;
/// Tasks whose user is kept (`Owners::users`) at most, the oldest forgotten first.
const MAX_USERS: usize = 16_384;

async fn send(peer: Peer<RoleServer>, exposed: String, mut params: TaskStatusNotificationParams) {
    params.task.task.task_id = exposed;
    let notification = ServerNotification::TaskStatusNotification(Notification::new(params));
    let _ = peer.send_notification(notification).await;
}

impl Child {
    /// Whether tasks requests can be routed to this child.
    fn serves_tasks(&self) -> bool {
        self.capabilities.supports_tasks() && !self.protocol.has_initialize()
    }
}

/// "unknown task" as SEP-2663 has it: invalid params.
fn unknown(id: &str) -> Error {
    Error::Child {
        server: String::new(),
        error: Box::new(ErrorData::invalid_params(
            format!("unknown task: {}", ad_core::model::truncate_for_message(id)),
            None,
        )),
    }
}

impl Proxy {
    /// Whether some running child serves tasks (the aggregated front declares the extension then).
    pub fn serves_tasks(&self) -> bool {
        lock(&self.inner.children).values().any(|s| match s {
            Slot::Running(c) => c.serves_tasks(),
            _ => false,
        })
    }

    /// A child's task id as the aggregated front shows it.
    pub fn expose_task_id(server: &str, id: &str) -> String {
        format!("{server}{}{id}", names::SEP)
    }

    /// The server and the child's own id of a task id of the aggregated front.
    pub fn task_route(&self, exposed: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        names::split(exposed, children.keys().map(String::as_str))
            .map(|(s, id)| (s.to_owned(), id.to_owned()))
    }

    /// Remembers which session created a task, so the child's status notifications reach it. Only sessions that
    /// outlive the request (handshake-era clients) are remembered: a 2026-07-28 request has nowhere to be told.
    ///
    /// A child may tell a task's first change before its `CreateTaskResult` has reached us (the notification and
    /// the answer travel apart); such a notification waits in `early` and is sent on from here.
    pub fn own_task(&self, server: &str, id: &str, peer: Peer<RoleServer>, exposed: String) {
        let key = (server.to_owned(), id.to_owned());
        // One lock: a notification routed meanwhile finds either the owner or its place in `early` taken here.
        let mut owners = lock(&self.inner.task_owners);
        let early = owners.early.remove(&key);
        let terminal = early.as_ref().is_some_and(|p| p.status().is_terminal());
        if !terminal {
            owners.by_task.retain(|_, o| !o.peer.is_transport_closed());
            if owners.by_task.len() < MAX_OWNERS {
                owners.by_task.insert(
                    key,
                    Owner {
                        peer: peer.clone(),
                        exposed: exposed.clone(),
                    },
                );
            }
        }
        drop(owners);
        if let Some(params) = early {
            tokio::spawn(send(peer, exposed, params));
        }
    }

    /// `tasks/get` to the child that owns the task (`params.task_id` is the child's id), for `caller` (its client's
    /// capabilities and its user).
    pub async fn task_get(
        &self,
        server: &str,
        params: GetTaskParams,
        caller: &Caller,
    ) -> Result<GetTaskResult> {
        let id = params.task_id.clone();
        let child = self.task_child(server, &id)?;
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(params));
        match self
            .inner
            .task_request(&child, &id, request, caller)
            .await?
        {
            ServerResult::GetTaskResult(mut r) => {
                // A completed task's result passes the result guards, as the call's own result would.
                self.inner.guard_task(server, child.server_id, &mut r);
                Ok(r)
            }
            _ => Err(unexpected(server)),
        }
    }

    /// `tasks/update` to the child that owns the task.
    pub async fn task_update(
        &self,
        server: &str,
        params: UpdateTaskParams,
        caller: &Caller,
    ) -> Result<()> {
        let id = params.task_id.clone();
        let child = self.task_child(server, &id)?;
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        ack(
            server,
            self.inner
                .task_request(&child, &id, request, caller)
                .await?,
        )
    }

    /// `tasks/cancel` to the child that owns the task.
    pub async fn task_cancel(
        &self,
        server: &str,
        params: CancelTaskParams,
        caller: &Caller,
    ) -> Result<()> {
        let id = params.task_id.clone();
        let child = self.task_child(server, &id)?;
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
        ack(
            server,
            self.inner
                .task_request(&child, &id, request, caller)
                .await?,
        )
    }

    /// The running child of `server` if it serves tasks; a task of a server that is not running (or was restarted,
    /// taking its tasks with it) is unknown.
    fn task_child(&self, server: &str, id: &str) -> Result<Arc<Child>> {
        self.inner
            .running(server)
            .filter(|c| c.serves_tasks())
            .ok_or_else(|| unknown(id))
    }
}

fn ack(server: &str, r: ServerResult) -> Result<()> {
    match r {
        ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => Ok(()),
        _ => Err(unexpected(server)),
    }
}

fn unexpected(server: &str) -> Error {
    Error::Upstream {
        server: server.to_owned(),
        message: "answered a tasks request with something else than its result".into(),
    }
}

impl Inner {
    /// Files the user whose call made `child`'s task `id`, on a server that takes each user's own credentials.
    pub(super) fn own_task_user(&self, child: &Child, id: &str, caller: &Caller) {
        let Some(user) = crate::call::user_of(child, caller) else {
            return;
        };
        let mut owners = lock(&self.task_owners);
        if owners.users.len() >= MAX_USERS {
            owners.users.pop_front();
        }
        owners
            .users
            .push_back(((child.name.clone(), id.to_owned()), user));
    }

    /// One tasks request to `child` about its task `id`, with the caller's capabilities in `_meta` (a 2026-07-28
    /// child checks them on each request) and, on a server that takes each user's own credentials, the caller's
    /// user (its credentials go with the request); another user's task is unknown to the caller. Bounded by the
    /// child's call timeout.
    async fn task_request(
        &self,
        child: &Arc<Child>,
        id: &str,
        request: ClientRequest,
        caller: &Caller,
    ) -> Result<ServerResult> {
        let user = crate::call::user_of(child, caller);
        let owner = lock(&self.task_owners)
            .users
            .iter()
            .find(|((s, i), _)| s == &child.name && i == id)
            .map(|(_, u)| u.clone());
        if owner.is_some_and(|o| user.as_ref() != Some(&o)) {
            return Err(unknown(id));
        }
        let mut options = PeerRequestOptions::no_options();
        let mut meta = Some(RequestMetaObject::default());
        if let Some(m) = meta.as_mut() {
            m.set_client_capabilities(caller.capabilities.clone().unwrap_or_default());
        }
        if let Some(user) = &user {
            crate::call::name_in(&mut meta, user);
        }
        options.meta = meta;
        let handle = match child.peer.send_request_with_option(request, options).await {
            Ok(h) => h,
            Err(e) => return Err(child.explain_failure(e.to_string()).await),
        };
        let timeout = child.call_timeout;
        match tokio::time::timeout(timeout, handle.await_response()).await {
            Err(_) => Err(Error::Timeout {
                server: child.name.clone(),
                what: "tasks request",
                ms: timeout.as_millis() as u64,
            }),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(rmcp::ServiceError::McpError(error))) => Err(Error::Child {
                server: child.name.clone(),
                error: Box::new(error),
            }),
            Ok(Err(e)) => Err(child.explain_failure(e.to_string()).await),
        }
    }

    /// A child's `notifications/tasks`: to the session that created the task, under the id it knows; forgotten
    /// once the task is terminal.
    pub(super) async fn route_task_status(
        &self,
        server: &str,
        params: TaskStatusNotificationParams,
    ) {
        let key = (server.to_owned(), params.task.task.task_id.clone());
        let terminal = params.status().is_terminal();
        let target = {
            let mut owners = lock(&self.task_owners);
            let owner = if terminal {
                owners.by_task.remove(&key).map(|o| (o.peer, o.exposed))
            } else {
                owners
                    .by_task
                    .get(&key)
                    .map(|o| (o.peer.clone(), o.exposed.clone()))
            };
            if owner.is_none() {
                if owners.early.len() >= MAX_EARLY {
                    owners.early.clear();
                }
                owners.early.insert(key, params.clone());
            }
            owner
        };
        if let Some((peer, exposed)) = target {
            send(peer, exposed, params).await;
        }
    }
}
