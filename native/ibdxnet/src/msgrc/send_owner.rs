//! Who runs the send (and the receive) work (issue 31: fewer hand-offs per
//! round trip; the receive side: `recv_agent`, over the same lock). The
//! send thread's state sits behind a combining lock: whoever holds it runs
//! iterations. A user thread that publishes data while the send thread is
//! idle takes the lock and posts its own work requests instead of waking the
//! thread (a wake-up on two shared cores costs more than the post). One that
//! finds the lock held leaves a mark (`pending`) which the holder sees before
//! it lets go, and iterates once more for it. So published data is never
//! left unposted, and never posted twice: there is one state, and one thread
//! at a time runs it. While the send thread works it holds the lock in each
//! iteration, so it stays the owner of the queue pairs whenever it is busy.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};

const FREE: u32 = 0;
/// Held by the engine's own send (or shared) thread.
const THREAD: u32 = 1;
/// Held by a user's thread (`Engine::send_from_caller`).
const CALLER: u32 = 2;
/// The send thread ended: nobody runs the state any more.
const STOPPED: u32 = 3;

/// Who holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// The engine's thread.
    Thread,
    /// A user's thread.
    Caller,
}

/// The outcome of [`Owned::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran the state this many times, the sum of their work.
    Ran { runs: u32, work: usize },
    /// Held by someone else, who sees the mark (if one was left).
    Held(Holder),
    /// The send thread ended.
    Stopped,
}

/// A state run by one thread at a time.
pub(crate) struct Owned<S> {
    state: AtomicU32,
    /// Left by a caller after publishing: the holder runs once more.
    pending: AtomicBool,
    cell: UnsafeCell<Option<S>>,
    /// Test only: the holder ignores marks (the negative control of the
    /// stress test: data published while the lock is held stays behind).
    #[cfg(test)]
    pub(crate) ignore_marks: bool,
}

// SAFETY: the state is reached only by the thread that moved the lock word
// from FREE to THREAD or CALLER (an acquire) until it stores FREE (a
// release), or after STOPPED by the one thread that stopped it: at most one
// thread touches it at a time, and each sees the last one's writes. So the
// state only needs to be `Send`.
unsafe impl<S: Send> Sync for Owned<S> {}

/// Lets go of the lock when dropped, also on a panic in the state's run, so
/// that a caller's panic (caught at the JNI boundary) cannot wedge the engine.
struct Release<'a>(&'a AtomicU32);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(FREE, SeqCst);
    }
}

impl<S> Owned<S> {
    pub(crate) fn new(state: S) -> Self {
        Owned {
            state: AtomicU32::new(FREE),
            pending: AtomicBool::new(false),
            cell: UnsafeCell::new(Some(state)),
            #[cfg(test)]
            ignore_marks: false,
        }
    }

    /// Runs `f` on the state if the lock is free: once, then again while
    /// callers left marks meanwhile (each run begins after the mark it
    /// answers, so it sees that caller's data). `mark` (callers): leave a
    /// mark first, so that a holder runs for us if we cannot. Sequentially
    /// consistent on both words: a caller stores its mark then tries the
    /// lock, a holder frees the lock then reads the mark, so one of the two
    /// sees the other (Dekker).
    pub(crate) fn run(&self, by: Holder, mark: bool, mut f: impl FnMut(&mut S) -> usize) -> Outcome {
        if mark {
            self.pending.store(true, SeqCst);
        }
        let me = if by == Holder::Thread { THREAD } else { CALLER };
        let (mut runs, mut work) = (0u32, 0usize);
        loop {
            if let Err(held) = self.state.compare_exchange(FREE, me, SeqCst, SeqCst) {
                if runs > 0 {
                    // Taken by another after our release: it answers the marks.
                    return Outcome::Ran { runs, work };
                }
                return match held {
                    STOPPED => Outcome::Stopped,
                    THREAD => Outcome::Held(Holder::Thread),
                    _ => Outcome::Held(Holder::Caller),
                };
            }
            let release = Release(&self.state);
            // SAFETY: we moved the word from FREE to ours: the state is ours
            // until `release` drops (see the `Sync` impl).
            let state = unsafe { &mut *self.cell.get() };
            let Some(s) = state.as_mut() else {
                return Outcome::Stopped; // unreachable: taken out only after STOPPED
            };
            self.pending.store(false, SeqCst);
            loop {
                runs += 1;
                work += f(s);
                #[cfg(test)]
                if self.ignore_marks {
                    return Outcome::Ran { runs, work };
                }
                if !self.pending.swap(false, SeqCst) {
                    break;
                }
            }
            drop(release);
            if !self.pending.load(SeqCst) {
                return Outcome::Ran { runs, work };
            }
        }
    }

    /// Runs `f` on the state once if the lock is free (the send thread's
    /// arming): None if someone else holds it.
    pub(crate) fn try_with<R>(&self, f: impl FnOnce(&mut S) -> R) -> Option<R> {
        self.state.compare_exchange(FREE, THREAD, SeqCst, SeqCst).ok()?;
        let _release = Release(&self.state);
        // SAFETY: ours until `_release` drops, as in `run`.
        let state = unsafe { &mut *self.cell.get() };
        state.as_mut().map(f)
    }

    /// The send thread's end: waits for a caller to let go, then keeps the
    /// lock for good and drops the state (its connections and rings).
    pub(crate) fn stop(&self) {
        self.stop_with(|_| {});
    }

    /// As [`Owned::stop`], running `last` on the state before it is dropped
    /// (the receive thread gives back the buffers it holds).
    pub(crate) fn stop_with(&self, last: impl FnOnce(&mut S)) {
        while self.state.compare_exchange(FREE, STOPPED, SeqCst, SeqCst).is_err() {
            if self.state.load(SeqCst) == STOPPED {
                return;
            }
            std::thread::yield_now();
        }
        // SAFETY: STOPPED is never left and no run starts any more: ours alone.
        let state = unsafe { &mut *self.cell.get() };
        if let Some(mut s) = state.take() {
            last(&mut s);
        }
    }
}

#[cfg(test)]
#[path = "send_owner_tests.rs"]
mod tests;
