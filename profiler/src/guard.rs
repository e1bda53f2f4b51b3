//! The FFI boundary's safety net: run bookkeeping so that a bug in it can neither unwind into a
//! user's program nor print a panic message into the user's output.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Run `f`; a panic in it is swallowed (silently) and gives `None`. Inlined, so that `f` runs
/// in its caller's section (footprint.rs: the code right after the real `MPI_Init` must stay
/// in `.text.init`).
#[inline(always)]
pub fn quietly<R>(f: impl FnOnce() -> R) -> Option<R> {
    install_quiet_hook();
    let was = QUIET.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f)).ok();
    QUIET.with(|q| q.set(was));
    r
}

/// [`quietly`] for bookkeeping that runs inside a counted MPI call (between `rt::enter` and the
/// end of `rt::leave`): the hook already stays silent there, so no thread-local flag needs
/// setting, which keeps this cheap enough for every call.
#[inline(always)]
pub fn contained<R>(f: impl FnOnce() -> R) -> Option<R> {
    install_quiet_hook();
    catch_unwind(AssertUnwindSafe(f)).ok()
}

/// Wrap the process's panic hook so it stays silent for panics inside [`quietly`] or inside a
/// counted MPI call (where only our bookkeeping runs: a panic in a user's MPI callback could not
/// unwind through MPI's C frames anyway), and behaves as before for everything else (the host
/// program may be Rust and have its own hook).
#[inline(always)]
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) && !crate::threads::inside_mpi() {
                previous(info)
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_contained() {
        assert_eq!(quietly(|| 7), Some(7));
        assert_eq!(quietly(|| -> i32 { panic!("bookkeeping bug") }), None);
        assert_eq!(quietly(|| 8), Some(8));
    }
}
