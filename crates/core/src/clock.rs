//! Deadlines kept off the async runtime: one thread sleeps until the earliest and wakes the futures that are due.
//!
//! While any tokio timer is pending, every park of the runtime is an `epoll_wait` with a timeout, which arms a
//! kernel timer each time the proxy waits for its client or a child: twice per relayed call, for calls that never
//! time out. On this project's VMs that measured 1.5-3 us of each proxied call (BENCHMARKS.md, "Fast lane, fifth
//! pass"). The timers that stay pending while calls flow (call deadlines, the metrics window, the database watch's
//! settle delay after our own writes, the local model's idle unload) sleep here instead: the runtime parks without a
//! timeout, and this thread wakes it only when a deadline passes. The thread arms a kernel timer once per deadline it
//! sleeps towards, not per wait.
//!
//! For deadlines where a millisecond of lateness does not matter; not under tokio's paused time (tests): these
//! sleeps follow the real clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, Once};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

struct State {
    /// Waiting sleeps by deadline (and a number, for sleeps with the same deadline).
    due: BTreeMap<(Instant, u64), oneshot::Sender<()>>,
    next: u64,
    /// When the thread wakes next on its own (`None`: only when told).
    armed: Option<Instant>,
}

struct Clock {
    state: Mutex<State>,
    changed: Condvar,
}

impl Clock {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The thread: wakes each sleep whose deadline passed, then waits for the next deadline or an earlier one.
    fn run(&self) {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            let mut fired = Vec::new();
            while let Some(entry) = state.due.first_entry()
                && entry.key().0 <= now
            {
                fired.push(entry.remove());
            }
            state.armed = state.due.first_key_value().map(|(k, _)| k.0);
            let armed = state.armed;
            if !fired.is_empty() {
                // Woken outside the lock: a woken task may drop another sleep (which takes the lock) right away.
                drop(state);
                for tx in fired {
                    let _ = tx.send(());
                }
                state = self.lock();
                continue;
            }
            state = match armed {
                Some(at) => {
                    self.changed
                        .wait_timeout(state, at.saturating_duration_since(now))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// The clock; its thread starts with the first use.
fn clock() -> &'static Clock {
    static CLOCK: Clock = Clock {
        state: Mutex::new(State {
            due: BTreeMap::new(),
            next: 0,
            armed: None,
        }),
        changed: Condvar::new(),
    };
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        std::thread::Builder::new()
            .name("agent-discover-clock".into())
            .spawn(|| CLOCK.run())
            .expect("cannot start the clock thread");
    });
    &CLOCK
}

/// Completes at `deadline` (or soon after); dropping it cancels it. Like tokio's, it is registered when first
/// polled: a sleep that is never polled (a disabled `select!` branch) costs nothing and wakes no thread.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        waiting: None,
    }
}

/// Completes after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// A pending [`sleep_until`].
pub struct Sleep {
    deadline: Instant,
    /// Its key in the clock's table and the end the clock fires, once registered.
    waiting: Option<((Instant, u64), oneshot::Receiver<()>)>,
}

impl Sleep {
    fn register(deadline: Instant) -> ((Instant, u64), oneshot::Receiver<()>) {
        let clock = clock();
        let (tx, rx) = oneshot::channel();
        let mut state = clock.lock();
        let key = (deadline, state.next);
        state.next += 1;
        state.due.insert(key, tx);
        // The thread sleeps towards a later deadline (or none): it must look again. Otherwise it wakes in time anyway.
        if state.armed.is_none_or(|armed| deadline < armed) {
            state.armed = Some(deadline);
            clock.changed.notify_one();
        }
        (key, rx)
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let (_, rx) = self
            .waiting
            .get_or_insert_with(|| Sleep::register(deadline));
        // The sender is only dropped by firing it (the clock lives as long as the process).
        Pin::new(rx).poll(cx).map(|_| ())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // Gone already when it fired. The thread may still wake at this deadline, finding nothing to do.
        if let Some((key, _)) = &self.waiting {
            clock().lock().due.remove(key);
        }
    }
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil-from-days, no date crate).
pub fn rfc3339(unix_ms: u64) -> String {
    rfc3339_signed(i64::try_from(unix_ms).unwrap_or(i64::MAX))
}

/// [`rfc3339`] for a signed count (times before 1970 too): the one date formatter of the workspace, also the store's
/// timestamp text.
pub fn rfc3339_signed(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let millis = unix_ms.rem_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sleep ends at its deadline, not before; when both are due at one wake, the earlier one is woken first.
    #[tokio::test]
    async fn sleeps_end_at_their_deadline_in_order() {
        let start = Instant::now();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let later = sleep(Duration::from_millis(60));
        let sooner = sleep(Duration::from_millis(20));
        let (o1, o2) = (order.clone(), order.clone());
        let a = tokio::spawn(async move {
            later.await;
            o1.lock().unwrap().push(("later", start.elapsed()));
        });
        let b = tokio::spawn(async move {
            sooner.await;
            o2.lock().unwrap().push(("sooner", start.elapsed()));
        });
        a.await.unwrap();
        b.await.unwrap();
        let order = order.lock().unwrap();
        assert_eq!(order[0].0, "sooner", "{order:?}");
        assert!(order[0].1 >= Duration::from_millis(20), "{order:?}");
        assert!(order[1].1 >= Duration::from_millis(60), "{order:?}");
    }

    /// A deadline earlier than the one the thread sleeps towards is kept: the thread is told, not left sleeping
    /// for an hour.
    #[tokio::test]
    async fn an_earlier_deadline_wakes_the_thread() {
        let _far = sleep(Duration::from_secs(3600));
        let start = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), sleep(Duration::from_millis(30)))
            .await
            .expect("the earlier sleep did not end");
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    /// A sleep is registered when first polled, and a dropped one leaves nothing behind.
    #[tokio::test]
    async fn a_dropped_sleep_leaves_nothing_behind() {
        let mut s = sleep(Duration::from_secs(3600));
        assert!(s.waiting.is_none(), "registered before it was polled");
        assert!(futures::poll!(&mut s).is_pending());
        let key = s.waiting.as_ref().unwrap().0;
        assert!(clock().lock().due.contains_key(&key));
        drop(s);
        assert!(!clock().lock().due.contains_key(&key));
    }
}
