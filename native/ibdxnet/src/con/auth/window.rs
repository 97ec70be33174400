//! The replay window: which sequence numbers of one sender instance were
//! seen (see the module comment of `con::auth`).

use super::{MAX_AHEAD, WINDOW};

/// What the window says about a sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seq {
    /// Not seen, in the window or ahead of it by at most [`MAX_AHEAD`]: recorded.
    Fresh,
    /// Seen before, older than the window, or 0.
    Replayed,
    /// More than [`MAX_AHEAD`] beyond the highest accepted: not recorded.
    TooFarAhead,
}

/// Sliding window over one instance's sequence numbers.
#[derive(Debug, Default, Clone)]
pub(super) struct ReplayWindow {
    pub(super) highest: u64,
    /// Bit i: `highest - i` was seen.
    pub(super) seen: u128,
}

impl ReplayWindow {
    /// Records `seq` if it is fresh (see [`Seq`]).
    pub(super) fn accept(&mut self, seq: u64) -> Seq {
        if seq == 0 {
            return Seq::Replayed;
        }
        if seq > self.highest {
            let shift = seq - self.highest;
            if shift > MAX_AHEAD {
                return Seq::TooFarAhead;
            }
            self.seen = if shift >= WINDOW { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.highest = seq;
            return Seq::Fresh;
        }
        let back = self.highest - seq;
        if back >= WINDOW || self.seen & (1 << back) != 0 {
            return Seq::Replayed;
        }
        self.seen |= 1 << back;
        Seq::Fresh
    }

    /// `seq` is the sequence number of a correct answer to a fresh
    /// challenge: the sender's current one. Recorded as usual if the window
    /// allows it; otherwise (the window was pushed past the sender, or the
    /// sender jumped beyond the bound) everything up to `seq` counts as seen
    /// from now on. Numbers above `seq` the sender has not used yet.
    pub(super) fn resync(&mut self, seq: u64) {
        if self.accept(seq) != Seq::Fresh {
            *self = ReplayWindow { highest: seq, seen: u128::MAX };
        }
    }
}
