//! A concurrency cap with a bounded queue: `cap` calls at once, up to `queue` more waiting (each at most its wait
//! limit) for a slot in arrival order (tokio's semaphore is fair), the rest refused at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) struct Gate {
    slots: Arc<Semaphore>,
    pub(crate) cap: u32,
    pub(crate) queue: u32,
    waiting: AtomicU32,
}

/// A slot held by a call in flight; dropped when the call ends.
pub(crate) type Permit = OwnedSemaphorePermit;

impl Gate {
    pub(crate) fn new(cap: u32, queue: u32) -> Gate {
        Gate {
            slots: Arc::new(Semaphore::new(cap as usize)),
            cap,
            queue,
            waiting: AtomicU32::new(0),
        }
    }

    /// A slot now, or `None`.
    pub(crate) fn try_enter(&self) -> Option<Permit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A slot, waiting in the queue for at most `wait`; `Err` says why not.
    pub(crate) async fn enter(&self, wait: Duration) -> Result<Permit, &'static str> {
        if let Some(p) = self.try_enter() {
            return Ok(p);
        }
        // Counted before waiting: the bound holds however many arrive at once.
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err("its queue is full");
        }
        let got = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match got {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err("it is shutting down"),
            Err(_) => Err("the call waited its whole wait limit in the queue"),
        }
    }

    /// Calls in flight now.
    pub(crate) fn in_flight(&self) -> u32 {
        self.cap
            .saturating_sub(self.slots.available_permits() as u32)
    }

    /// Calls waiting now.
    pub(crate) fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_refuses_and_a_long_wait_expires() {
        let gate = Arc::new(Gate::new(1, 1));
        let held = gate.enter(Duration::from_secs(1)).await.unwrap();
        assert_eq!(gate.in_flight(), 1);
        let g = gate.clone();
        let queued = tokio::spawn(async move { g.enter(Duration::from_secs(5)).await.map(drop) });
        while gate.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            gate.enter(Duration::from_secs(1)).await.unwrap_err(),
            "its queue is full"
        );
        drop(held);
        queued.await.unwrap().unwrap();
        let held = gate.enter(Duration::from_secs(1)).await.unwrap();
        let expired = gate.enter(Duration::from_millis(20)).await.unwrap_err();
        assert!(expired.contains("wait limit"), "{expired}");
        drop(held);
        assert!(gate.try_enter().is_some());
    }
}
