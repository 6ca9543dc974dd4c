//! Restoring the servers flagged active when a process starts, so that it is ready at once: their stored tools (the
//! definitions last approved, today's filters and pins applied) are listed before they run, and a call to one still
//! starting waits for its start (within its activation limit) instead of failing.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool;
use tokio::sync::watch;

use ad_core::error::{Error, Result};
use ad_core::model::Server;

use crate::state::{Child, Inner, Outcome, Proxy, Restoring, Slot};
use crate::sync::lock;

impl Proxy {
    /// Lists every server flagged active and installed with its stored tools, and makes calls to it wait for its
    /// start, without starting anything yet: what a front calls before it answers its first request, so that a client
    /// that lists or calls at once finds what it found last time. [`Proxy::restore_in_background`] starts them.
    pub fn expect_restore(&self) {
        let servers = match self.inner.registry.store().servers_to_restore() {
            Ok(s) => s,
            Err(e) => return tracing::warn!(error = %e, "cannot read servers to restore"),
        };
        let children = lock(&self.inner.children);
        let mut restoring = lock(&self.inner.restoring);
        for s in servers {
            if children.contains_key(&s.name) || restoring.contains_key(&s.name) {
                continue;
            }
            let (tx, done) = watch::channel(None);
            let tools = self.inner.stored_tools(&s);
            restoring.insert(
                s.name,
                Restoring {
                    tools,
                    done,
                    start: Some(tx),
                },
            );
        }
    }

    /// Re-activates, in the background, every server flagged active and installed; a server that fails to come up
    /// has its flag cleared and its error recorded, unless `team` (replicas of one registry: the flag is the team's,
    /// see [`Proxy::follow`]). Until each has started it is listed with its stored tools and calls to it wait for it
    /// (see [`Proxy::expect_restore`], which this calls first). Returns at once.
    pub fn restore_in_background(&self, team: bool) {
        self.expect_restore();
        let starts: Vec<(String, watch::Sender<Outcome>)> = lock(&self.inner.restoring)
            .iter_mut()
            .filter_map(|(name, r)| Some((name.clone(), r.start.take()?)))
            .collect();
        let proxy = self.clone();
        tokio::spawn(async move {
            let starts = starts.into_iter().map(|(name, tx)| {
                let proxy = proxy.clone();
                async move {
                    let outcome = if team {
                        match proxy.follow(&name).await {
                            Some(Err(e)) => {
                                tracing::warn!(server = %name, error = %e, "could not start an active server; trying again later");
                                Err(e.to_string())
                            }
                            _ => Ok(()),
                        }
                    } else {
                        match proxy.activate(&name).await {
                            Err(e) => {
                                tracing::warn!(server = %name, error = %e, "could not restore active server; its active flag is cleared");
                                Err(e.to_string())
                            }
                            Ok(_) => Ok(()),
                        }
                    };
                    lock(&proxy.inner.restoring).remove(&name);
                    let _ = tx.send(Some(outcome));
                }
            });
            futures::future::join_all(starts).await;
        });
    }
}

impl Inner {
    /// The tools a restored server is listed with until it runs: those it exposed last time (stored by its last
    /// start) that today's filters allow and whose pin is approved, each with its approved definition (name, title,
    /// description, schemas, annotations). A tool whose pin is pending or missing is left out, as a live listing
    /// would withhold it; if the pins cannot be read, nothing is listed (fail closed).
    pub(crate) fn stored_tools(&self, server: &Server) -> Vec<Tool> {
        let (Ok(stored), Ok(pins)) = (
            self.registry.tools(server.id),
            self.registry.store().pins_of(server.id),
        ) else {
            return Vec::new();
        };
        let pins: HashMap<String, ad_store::PinRow> =
            pins.into_iter().map(|p| (p.tool.clone(), p)).collect();
        stored
            .into_iter()
            .filter(|t| self.registry.tool_allowed(&server.name, &t.name))
            .filter_map(|t| {
                let pin = pins.get(&t.name).filter(|p| !p.pending())?;
                serde_json::from_value::<Tool>(pin.approved_definition.clone()?).ok()
            })
            .collect()
    }

    /// Waits for the restore of `server` if it is still starting here: the running child, the start's error, or
    /// `None` when it is not being restored.
    pub(crate) async fn restored_child(&self, server: &str) -> Option<Result<Arc<Child>>> {
        let mut done = lock(&self.restoring).get(server)?.done.clone();
        let outcome = match done.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or(Ok(())),
            Err(_) => Err("its start was abandoned".to_owned()),
        };
        Some(match (outcome, lock(&self.children).get(server)) {
            (Ok(()), Some(Slot::Running(child))) => Ok(child.clone()),
            (Err(e), _) => Err(Error::Unavailable(format!(
                "server `{server}` is flagged active but could not start here: {e}"
            ))),
            (Ok(()), _) => Err(Error::Unavailable(format!(
                "server `{server}` is flagged active but is not running here (deactivated or backing off)"
            ))),
        })
    }
}
