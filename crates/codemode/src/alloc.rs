//! The engine's heap, counted: QuickJS allocates through this wrapper of rquickjs's Rust allocator, which refuses an
//! allocation past the memory limit and throws the run's stop switch. QuickJS's own limit would only raise a
//! catchable `InternalError` (or throw `null` when even that cannot be allocated), which a script may swallow or which
//! reads like any other error; refused here, the run ends with the memory limit's typed error whatever the script
//! does next.

use std::sync::Arc;

use rquickjs::allocator::{Allocator, RustAllocator};

use crate::limits::Limit;
use crate::meter::{Meter, Stop};

pub(crate) struct Counted {
    inner: RustAllocator,
    used: usize,
    limit: usize,
    meter: Arc<Meter>,
}

impl Counted {
    pub(crate) fn new(limit: usize, meter: Arc<Meter>) -> Counted {
        Counted {
            inner: RustAllocator,
            used: 0,
            limit,
            meter,
        }
    }

    /// Whether `more` bytes fit; if not, the run is stopped.
    fn admit(&self, more: usize) -> bool {
        if self.used.saturating_add(more) > self.limit {
            self.meter.stop(Stop::Limit(Limit::Memory));
            return false;
        }
        true
    }
}

// SAFETY: every pointer handed out comes from `RustAllocator` unchanged, and every pointer taken back is passed to it
// unchanged; the wrapper only counts, using `RustAllocator::usable_size` on pointers it allocated.
unsafe impl Allocator for Counted {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admit(size) {
            return std::ptr::null_mut();
        }
        let p = self.inner.alloc(size);
        if !p.is_null() {
            // SAFETY: `p` was just allocated by `RustAllocator`.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        let Some(total) = count.checked_mul(size) else {
            return std::ptr::null_mut();
        };
        if !self.admit(total) {
            return std::ptr::null_mut();
        }
        let p = self.inner.calloc(count, size);
        if !p.is_null() {
            // SAFETY: `p` was just allocated by `RustAllocator`.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller hands back a pointer this allocator gave out.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            self.inner.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        // SAFETY: the caller hands back a pointer this allocator gave out.
        let old = unsafe { RustAllocator::usable_size(ptr) };
        if new_size > old && !self.admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above; on success the old pointer is no longer ours, the new one is.
        unsafe {
            let p = self.inner.realloc(ptr, new_size);
            if !p.is_null() {
                self.used = self.used.saturating_sub(old) + RustAllocator::usable_size(p);
            }
            p
        }
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller hands a pointer this allocator gave out.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}
