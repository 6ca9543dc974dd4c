//! Locking the proxy's std mutexes: a panic while one was held leaves its data usable, so a poisoned lock is taken
//! as it is.

use std::sync::Mutex;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
