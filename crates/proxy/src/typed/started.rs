//! Telling when a stdio child has started, before the handshake: a `ping` (which MCP allows before `initialize`)
//! answered, or read from the child's stdin and left unanswered. rmcp gives `server/discover` a fixed 10 s before it
//! falls back to `initialize` for good, so the handshake must not begin while the server is still starting.

/// The write end of a child's stdin pipe, as the OS names it.
#[cfg(unix)]
pub(crate) type PipeEnd = std::os::fd::RawFd;
#[cfg(not(unix))]
pub(crate) type PipeEnd = ();

/// `stdin`'s write end.
#[cfg(unix)]
pub(crate) fn pipe_end(stdin: &tokio::process::ChildStdin) -> PipeEnd {
    use std::os::fd::AsRawFd;
    stdin.as_raw_fd()
}

#[cfg(not(unix))]
pub(crate) fn pipe_end(_stdin: &tokio::process::ChildStdin) -> PipeEnd {}

use rmcp::model::ClientJsonRpcMessage;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::codec::Decoder;

use super::{READ_CHUNK, TypedChildTransport};

/// The id of the `ping` that tells a child has started.
pub(super) const STARTED_PING_ID: &str = "agent-discover-started";
/// How long a child that has read the `ping` may leave it unanswered before it is taken as one that answers nothing
/// before `initialize` (the handshake then goes on).
const SILENT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How a child showed it has started ([`TypedChildTransport::await_started`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Started {
    /// It answered the `ping`.
    Answered,
    /// It read the `ping` from its stdin and left it unanswered.
    ReadButSilent,
    /// Its stdout closed (it exited, or is exiting).
    Closed,
}

/// Bytes written to a pipe (at its write end `fd`) that the reader has not read yet.
#[cfg(target_os = "linux")]
fn unread_in_pipe(fd: PipeEnd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `n`, which we own; `fd` is open while the transport holds the writer.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    (r == 0).then_some(n.max(0) as usize)
}

#[cfg(not(target_os = "linux"))]
fn unread_in_pipe(_fd: PipeEnd) -> Option<usize> {
    None
}

impl<R, W> TypedChildTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Waits until the child has started, before the handshake: it answered a `ping` (which MCP allows before
    /// `initialize`), or it read the ping from its stdin (`stdin_fd`, the pipe's write end) and left it unanswered for
    /// [`SILENT_GRACE`] (a server that answers nothing before `initialize`), or its stdout closed. rmcp gives
    /// `server/discover` a fixed 10 s before it falls back to `initialize` for good; a server still starting then (a
    /// first `npx -y` download, a slow import) would be taken for a legacy one, and a 2026-07-28 server refuses the
    /// `initialize` that follows. What the child sends meanwhile is handed to rmcp first.
    pub(crate) async fn await_started(&mut self, stdin_fd: Option<PipeEnd>) -> Started {
        let ping: ClientJsonRpcMessage = match serde_json::from_value(serde_json::json!(
            {"jsonrpc": "2.0", "id": STARTED_PING_ID, "method": "ping"}
        )) {
            Ok(m) => m,
            Err(_) => return Started::Answered,
        };
        self.probe.get_mut().unwrap_or_else(|e| e.into_inner()).ping = true;
        if self.writer.send(ping).await.is_err() {
            return Started::Closed;
        }
        let mut read_since: Option<std::time::Instant> = None;
        loop {
            // The whole lines read so far: anything but the ping's answer (which `message` drops) is kept for rmcp.
            loop {
                let frame = if self.eof {
                    self.codec.decode_eof(&mut self.buf)
                } else {
                    self.codec.decode(&mut self.buf)
                };
                match frame {
                    Ok(Some(parts)) => {
                        if let Some((m, _)) = self.message(&parts) {
                            self.early.push_back(m);
                        }
                        if !self.probe.get_mut().unwrap_or_else(|e| e.into_inner()).ping {
                            return Started::Answered;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => continue,
                }
            }
            if self.eof {
                return Started::Closed;
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
                self.buf.reserve(READ_CHUNK);
            }
            let poll = tokio::time::sleep(std::time::Duration::from_millis(100));
            tokio::select! {
                r = self.read.read_buf(&mut self.buf) => match r {
                    Ok(0) => self.eof = true,
                    Ok(_) => {}
                    Err(_) => return Started::Closed,
                },
                _ = poll => {
                    if stdin_fd.and_then(unread_in_pipe) == Some(0) {
                        if read_since.get_or_insert_with(std::time::Instant::now).elapsed() >= SILENT_GRACE {
                            return Started::ReadButSilent;
                        }
                    } else {
                        read_since = None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId};
    use rmcp::transport::Transport;
    use serde_json::json;
    use tokio::io::AsyncBufReadExt;

    use super::super::tests::{pair, reply, send, variant};
    use super::*;

    #[tokio::test]
    async fn a_late_answer_to_an_abandoned_discover_probe_is_dropped() {
        use rmcp::model::{DiscoverRequest, DiscoverRequestParams};
        let (mut t, mut child) = pair();
        let probe = ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {})),
            RequestId::Number(0),
        );
        t.send(probe).await.unwrap();
        let mut line = String::new();
        child.0.read_line(&mut line).await.unwrap();
        assert!(line.contains("server/discover"), "{line}");
        // The client gave up on the probe and asks `initialize`; the slow server answers both, in order.
        send(
            &mut t,
            &mut child,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        )
        .await;
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "Method not found"}}),
        )
        .await;
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}),
        )
        .await;
        let got = t.receive().await.unwrap();
        match got {
            JsonRpcMessage::Response(r) => {
                assert_eq!(r.id, RequestId::Number(1));
                assert_eq!(variant(&r.result), "initialize");
            }
            other => panic!("the probe's late answer was not dropped: {other:?}"),
        }
        // An answer to a probe that was not given up on still arrives.
        let probe = ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {})),
            RequestId::Number(2),
        );
        t.send(probe).await.unwrap();
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}}),
        )
        .await;
        assert!(
            matches!(t.receive().await.unwrap(), JsonRpcMessage::Error(e) if e.id == Some(RequestId::Number(2)))
        );
    }
}
