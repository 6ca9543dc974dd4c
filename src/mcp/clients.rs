//! What every connected MCP client gets from this process: an id of its own, and the signal that ends serving it.

use std::sync::atomic::AtomicU64;

pub(crate) static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not when the future is first
/// polled, so a signal that arrives right after a caller announced readiness is not fatal.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let signals = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        async move {
            let (Ok(mut term), Ok(mut int)) = signals else {
                return std::future::pending().await;
            };
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
