//! A spin lock for the process-wide state that threads at `MPI_THREAD_MULTIPLE` share (the
//! supersteps, the tracked requests), and its lock-free use below that level.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// A lock one thread takes for a few nanoseconds per call, so waiting is rare and short. Taking
/// it is one atomic swap and releasing it a plain store, where `std::sync::Mutex` pays a second
/// atomic read-modify-write on every call.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `SpinGuard`, which exists for one thread at a time,
// or through `unlocked`, whose callers guarantee the same.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        while self.locked.swap(true, Acquire) {
            while self.locked.load(Relaxed) {
                std::hint::spin_loop();
            }
        }
        SpinGuard { lock: self }
    }

    /// The value without taking the lock.
    ///
    /// # Safety
    /// No other thread uses the value, with the lock or without, while the reference lives, and
    /// its last use happened before this one (no data race).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub unsafe fn unlocked(&self) -> &mut T {
        // SAFETY: the caller's.
        unsafe { &mut *self.value.get() }
    }
}

/// Holds the lock; releases it when dropped, also while a panic unwinds.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
    }
}
