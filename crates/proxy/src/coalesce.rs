//! The write half of our stdio transports (to the client and to each child), coalescing: each message is framed by
//! rmcp's `JsonRpcMessageCodec` into one shared buffer at once, in the order the service loop sends them, and the
//! send that gets the writer first writes everything buffered so far in one `write`. Under concurrent calls that is
//! one system call (and one wake-up of the reader) for a whole batch instead of one per message; a lone message costs
//! the same as before. A send completes once its bytes are written (by itself or by the send before it).

use std::sync::{Arc, Mutex};

use rmcp::transport::async_rw::JsonRpcMessageCodec;
use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Encoder;

pub struct CoalescingWriter<W> {
    shared: Arc<Shared<W>>,
}

impl<W> Clone for CoalescingWriter<W> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<W> {
    /// Framed messages not yet written; `None` once closed.
    pending: Mutex<Option<BytesMut>>,
    out: tokio::sync::Mutex<Option<W>>,
}

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "transport is closed")
}

impl<W: AsyncWrite + Send + Unpin + 'static> CoalescingWriter<W> {
    pub fn new(write: W) -> Self {
        Self {
            shared: Arc::new(Shared {
                pending: Mutex::new(Some(BytesMut::with_capacity(8 * 1024))),
                out: tokio::sync::Mutex::new(Some(write)),
            }),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Option<BytesMut>> {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Frames `item` now (so messages go out in the order of the calls) and returns the future that writes it.
    pub fn send<T: Serialize>(
        &self,
        item: T,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
        let framed = self.frame(item);
        self.write_out(framed)
    }

    /// Frames `item` into the shared buffer.
    fn frame<T: Serialize>(&self, item: T) -> std::io::Result<()> {
        match self.pending().as_mut() {
            None => Err(closed()),
            Some(buf) => {
                let before = buf.len();
                JsonRpcMessageCodec::<T>::default()
                    .encode(item, buf)
                    .map_err(|e| {
                        // Never leave half a message for the next send to write.
                        buf.truncate(before);
                        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
                    })
            }
        }
    }

    /// Writes everything framed so far (unless an earlier send holding the writer does).
    fn write_out(
        &self,
        framed: std::io::Result<()>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
        let shared = self.shared.clone();
        async move {
            framed?;
            let mut out = shared.out.lock().await;
            let batch = match shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                Some(buf) => buf.split(),
                None => return Err(closed()),
            };
            let write = out.as_mut().ok_or_else(closed)?;
            // Empty: an earlier send, which held the writer, wrote this message with its own (the flush is
            // still done here, in case that send left it to us).
            if !batch.is_empty() {
                write.write_all(&batch).await?;
            }
            write.flush().await
        }
    }

    /// Writes everything framed so far at once when the writer is free and the pipe takes it all, without a future
    /// or a task (the fast lane's common case). False when that could not be done: whatever was not written is back
    /// at the head of the buffer, in order, for [`Self::write_out`].
    fn try_write_now(&self) -> bool {
        let Ok(mut out) = self.shared.out.try_lock() else {
            return false;
        };
        let Some(write) = out.as_mut() else {
            return false;
        };
        let mut batch = match self.pending().as_mut() {
            Some(buf) => buf.split(),
            None => return false,
        };
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut written = 0;
        while written < batch.len() {
            match std::pin::Pin::new(&mut *write).poll_write(&mut cx, &batch[written..]) {
                std::task::Poll::Ready(Ok(n)) if n > 0 => written += n,
                std::task::Poll::Ready(Err(e)) => {
                    tracing::debug!("fast lane write failed: {e}");
                    return true;
                }
                // Full pipe (or a zero-length write): the rest goes the slow way.
                _ => break,
            }
        }
        if written == batch.len() {
            return std::pin::Pin::new(&mut *write)
                .poll_flush(&mut cx)
                .is_ready();
        }
        let _ = batch.split_to(written);
        let mut pending = self.pending();
        if let Some(buf) = pending.as_mut() {
            // What was framed meanwhile goes after the rest of this batch.
            batch.extend_from_slice(buf);
            *buf = batch;
        }
        false
    }

    /// Writes what is still buffered, then closes the write half; later sends fail.
    pub async fn close(&self) -> std::io::Result<()> {
        let mut out = self.shared.out.lock().await;
        let rest = self.pending().take();
        let Some(mut write) = out.take() else {
            return Ok(());
        };
        if let Some(rest) = rest.filter(|r| !r.is_empty()) {
            write.write_all(&rest).await?;
        }
        write.shutdown().await
    }
}

/// Sends messages without awaiting: the fast lane (`relay.rs`) writes from inside a transport's receive path.
pub trait Sink<T>: Send + Sync {
    /// Frames `item` at once (so it keeps its place among the messages sent), to be written by the next
    /// [`Sink::flush_now`] or send. False when it could not be framed (the writer is closed).
    fn frame_now(&self, item: &T) -> bool;

    /// Frames whatever `encode` puts into the buffer (a message of another type, framed by rmcp's codec there), in
    /// place like [`Sink::frame_now`]; what it wrote is taken back when it fails. False when closed or failed.
    fn frame_with(&self, encode: &mut dyn FnMut(&mut BytesMut) -> bool) -> bool;

    /// Writes what is framed now if the pipe takes it; otherwise a task finishes the write. A write error is only
    /// logged: the connection's reader sees the end.
    fn flush_now(&self);

    /// [`Sink::frame_now`], then [`Sink::flush_now`].
    fn send_now(&self, item: &T) {
        if self.frame_now(item) {
            self.flush_now();
        }
    }
}

impl<T: Serialize, W: AsyncWrite + Send + Unpin + 'static> Sink<T> for CoalescingWriter<W> {
    fn frame_now(&self, item: &T) -> bool {
        match self.frame(item) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("fast lane message not sent: {e}");
                false
            }
        }
    }

    fn frame_with(&self, encode: &mut dyn FnMut(&mut BytesMut) -> bool) -> bool {
        let mut pending = self.pending();
        let Some(buf) = pending.as_mut() else {
            return false;
        };
        let before = buf.len();
        if encode(buf) {
            return true;
        }
        // Never leave half a message for the next send to write.
        buf.truncate(before);
        false
    }

    fn flush_now(&self) {
        if self.try_write_now() {
            return;
        }
        let mut write = Box::pin(self.write_out(Ok(())));
        // One poll in place: the writer is free and the pipe has room nearly always, and then no task is needed.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match write.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(Ok(())) => {}
            std::task::Poll::Ready(Err(e)) => tracing::debug!("fast lane write failed: {e}"),
            std::task::Poll::Pending => {
                tokio::spawn(async move {
                    if let Err(e) = write.await {
                        tracing::debug!("fast lane write failed: {e}");
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::AsyncReadExt;

    /// Messages sent together arrive whole, in order, newline-framed; the later sends find their bytes written.
    #[tokio::test]
    async fn sends_in_one_tick_are_written_together_in_order() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let w = CoalescingWriter::new(ours);
        let sends: Vec<_> = (0..5).map(|i| w.send(json!({"n": i}))).collect();
        for s in sends {
            s.await.unwrap();
        }
        w.close().await.unwrap();
        let mut got = String::new();
        theirs.read_to_string(&mut got).await.unwrap();
        assert_eq!(
            got,
            "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"
        );
        assert!(w.send(json!(1)).await.is_err(), "closed");
    }

    /// A send dropped before it ran still goes out, with the next write or at close.
    #[tokio::test]
    async fn a_dropped_send_is_written_by_the_next_or_at_close() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let w = CoalescingWriter::new(ours);
        drop(w.send(json!("a")));
        w.send(json!("b")).await.unwrap();
        drop(w.send(json!("c")));
        w.close().await.unwrap();
        let mut got = String::new();
        theirs.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "\"a\"\n\"b\"\n\"c\"\n");
    }

    /// The fast lane's sends: framed at once in order, written by the flush (here without a task: the pipe has room).
    #[tokio::test]
    async fn frame_now_keeps_order_and_flush_now_writes() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let w = CoalescingWriter::new(ours);
        let sink: &dyn Sink<Value> = &w;
        assert!(sink.frame_now(&json!(1)));
        drop(w.send(json!(2)));
        sink.send_now(&json!(3));
        let mut got = vec![0u8; 6];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"1\n2\n3\n");
        w.close().await.unwrap();
        assert!(!sink.frame_now(&json!(4)), "closed");
        assert!(!sink.frame_with(&mut |_| true), "closed");
    }

    /// A pipe that takes only part of a batch: the rest is written by a task, before anything framed later.
    #[tokio::test]
    async fn a_full_pipe_gets_the_rest_later_in_order() {
        let (ours, mut theirs) = tokio::io::duplex(8);
        let w = CoalescingWriter::new(ours);
        let sink: &dyn Sink<Value> = &w;
        assert!(sink.frame_now(&json!("abcdef")));
        assert!(sink.frame_now(&json!("ghijkl")));
        sink.flush_now();
        sink.send_now(&json!(1));
        let mut got = vec![0u8; 20];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"\"abcdef\"\n\"ghijkl\"\n1\n");
    }

    /// `frame_with` keeps its place among the other sends, and a failed encoding leaves nothing behind.
    #[tokio::test]
    async fn frame_with_keeps_order_and_takes_back_a_failure() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let w = CoalescingWriter::new(ours);
        let sink: &dyn Sink<Value> = &w;
        assert!(sink.frame_now(&json!(1)));
        assert!(!sink.frame_with(&mut |buf| {
            buf.extend_from_slice(b"half");
            false
        }));
        assert!(sink.frame_with(&mut |buf| {
            JsonRpcMessageCodec::<Value>::default()
                .encode(json!(2), buf)
                .is_ok()
        }));
        sink.send_now(&json!(3));
        let mut got = vec![0u8; 6];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"1\n2\n3\n");
        w.close().await.unwrap();
    }
}
