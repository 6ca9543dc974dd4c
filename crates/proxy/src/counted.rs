//! A Streamable HTTP child's transport with the progress notifications it reads counted, as `typed.rs` counts a
//! stdio child's: when a call's result has been read, every progress notification the child sent before it has been
//! counted, so the call waits until they are forwarded and its client sees them before the result (rmcp hands each
//! notification to a task of its own, which a loaded machine may run after the result went out).

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::state::{ProgressSeen, legacy_token};

pub(super) struct Counted<T> {
    inner: T,
    seen: ProgressSeen,
    /// The transport of a child's legacy session: its tokens are keyed with [`legacy_token`].
    legacy_session: bool,
}

impl<T> Counted<T> {
    pub(super) fn new(inner: T, seen: ProgressSeen, legacy_session: bool) -> Self {
        Counted {
            inner,
            seen,
            legacy_session,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Counted<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let m = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(n) = &m
            && let ServerNotification::ProgressNotification(p) = &n.notification
        {
            let token = if self.legacy_session {
                legacy_token(&p.params.progress_token)
            } else {
                p.params.progress_token.clone()
            };
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let s = seen.entry(token).or_default();
            s.count += 1;
            s.order.push_back(p.params.progress);
        }
        Some(m)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
