//! How a child's failures read: its own JSON-RPC error as it sent it, what broke on the way, and an exit during a
//! call named with its cause and the last lines the child wrote on stderr.

use std::time::Duration;

use ad_core::error::Error;

use crate::spawn::StderrRing;
use crate::state::Child;

/// A forwarded request's failure: the child's own JSON-RPC error as it sent it, or what broke on the way.
pub(super) fn child_error(server: &str, e: rmcp::ServiceError) -> Error {
    match e {
        rmcp::ServiceError::McpError(error) => Error::Child {
            server: server.to_owned(),
            error: Box::new(error),
        },
        e => Error::Upstream {
            server: server.to_owned(),
            message: e.to_string(),
        },
    }
}

/// A child's exit while a call waited on it: the cause, with the last lines it wrote on stderr.
pub(super) fn exited_during_call(server: &str, cause: &str, stderr: &StderrRing) -> Error {
    with_stderr(
        Error::Upstream {
            server: server.to_owned(),
            message: format!("exited during the call: {cause}"),
        },
        stderr,
    )
}

pub(super) fn with_stderr(err: Error, stderr: &StderrRing) -> Error {
    let tail = stderr.tail(10);
    if tail.is_empty() {
        return err;
    }
    let joined = tail.join("\n");
    match err {
        Error::Upstream { server, message } => Error::Upstream {
            server,
            message: format!("{message}; last stderr lines:\n{joined}"),
        },
        Error::Timeout { server, what, ms } => Error::Upstream {
            server,
            message: format!("{what} timed out after {ms} ms; last stderr lines:\n{joined}"),
        },
        other => other,
    }
}

impl Child {
    /// A transport error is often the first sign of an exit: wait briefly for the exit watcher so the error names
    /// the real cause (exit code, stderr) instead of "transport closed".
    pub(super) async fn explain_failure(&self, transport_error: String) -> Error {
        if self.pid.is_some() {
            let mut exited = self.exited.clone();
            let _ = tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|c| c.is_some()))
                .await;
        }
        let cause = self.exited.borrow().clone();
        match cause {
            Some(c) => exited_during_call(&self.name, &c, &self.stderr),
            None => Error::Upstream {
                server: self.name.clone(),
                message: transport_error,
            },
        }
    }
}
