//! `GET /api/registry/events`: registry snapshots (`{seq, servers}`, see `crate::feed`) as Server-Sent Events. The
//! first event is the bootstrap (`seq` 0), then one per change; a client that reads slowly skips to the newest.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use super::AppState;

/// Each event: `event: snapshot`, `id: SEQ`, `data: {"seq":SEQ,"servers":[...]}`.
pub async fn stream(
    State(s): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let sub = s.app.subscribe_registry();
    let events = futures::stream::unfold(sub, |mut sub| async move {
        let snapshot = sub.next().await?;
        let data = serde_json::to_string(&*snapshot).unwrap_or_else(|_| "{}".into());
        let event = Event::default()
            .event("snapshot")
            .id(snapshot.seq.to_string())
            .data(data);
        Some((Ok(event), sub))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
