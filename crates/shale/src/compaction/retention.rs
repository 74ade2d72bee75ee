//! Which versions of a key survive a flush or a compaction.
//!
//! Live snapshots cut the sequence-number axis into stripes: stripe `i` holds the sequence numbers
//! visible to snapshot `i` but not to snapshot `i - 1`, and the last stripe holds everything newer
//! than the newest snapshot (visible to new reads). A reader sees, for each key, only the newest entry
//! in its stripe or an older stripe. So, walking one user key's entries newest first:
//! - the first entry of each stripe is kept; every other entry is shadowed for every reader and is
//!   dropped;
//! - a tombstone kept as the first entry of the oldest stripe can be dropped too when no deeper level
//!   can hold the key: nothing older remains for it to hide.
//!
//! The caller feeds entries in internal-key order (user key ascending, sequence number descending).

use crate::key::{ParsedKey, SeqNo, ValueKind};

/// What to do with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Keep,
    /// Hidden by a newer entry in the same stripe.
    DropShadowed,
    /// A tombstone with nothing left to hide.
    DropTombstone,
}

/// The retention state machine for one pass over sorted entries.
pub(crate) struct Retention {
    // INVARIANT: sorted ascending, no duplicates.
    snapshots: Vec<SeqNo>,
    current_key: Vec<u8>,
    has_current: bool,
    /// Stripe of the newest entry seen so far for the current key.
    last_stripe: usize,
}

impl Retention {
    /// `snapshots`: sequence numbers of the live snapshots, in any order.
    pub(crate) fn new(mut snapshots: Vec<SeqNo>) -> Retention {
        snapshots.sort_unstable();
        snapshots.dedup();
        Retention {
            snapshots,
            current_key: Vec::new(),
            has_current: false,
            last_stripe: 0,
        }
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Decides the fate of `entry`. `key_absent_below` answers whether no deeper level can hold the
    /// user key; it is consulted only for tombstones in the oldest stripe.
    pub(crate) fn decide(
        &mut self,
        entry: &ParsedKey<'_>,
        key_absent_below: impl FnOnce(&[u8]) -> bool,
    ) -> Decision {
        let stripe = self.stripe(entry.seq);
        if !self.has_current || self.current_key != entry.user_key {
            self.current_key.clear();
            self.current_key.extend_from_slice(entry.user_key);
            self.has_current = true;
        } else if stripe == self.last_stripe {
            return Decision::DropShadowed;
        }
        self.last_stripe = stripe;
        if entry.kind == ValueKind::Deletion && stripe == 0 && key_absent_below(entry.user_key) {
            return Decision::DropTombstone;
        }
        Decision::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        snapshots: Vec<SeqNo>,
        entries: &[(&[u8], SeqNo, ValueKind)],
        bottom: bool,
    ) -> Vec<Decision> {
        let mut r = Retention::new(snapshots);
        entries
            .iter()
            .map(|&(user_key, seq, kind)| {
                r.decide(
                    &ParsedKey {
                        user_key,
                        seq,
                        kind,
                    },
                    |_| bottom,
                )
            })
            .collect()
    }

    #[test]
    fn without_snapshots_only_the_newest_version_survives() {
        use Decision::*;
        let got = run(
            vec![],
            &[
                (b"a", 9, ValueKind::Value),
                (b"a", 5, ValueKind::Value),
                (b"b", 3, ValueKind::Value),
            ],
            false,
        );
        assert_eq!(got, vec![Keep, DropShadowed, Keep]);
    }

    #[test]
    fn a_snapshot_keeps_the_version_it_sees() {
        use Decision::*;
        let entries: &[(&[u8], SeqNo, ValueKind)] = &[
            (b"a", 9, ValueKind::Value),
            (b"a", 6, ValueKind::Value),
            (b"a", 5, ValueKind::Value),
            (b"a", 2, ValueKind::Value),
        ];
        assert_eq!(
            run(vec![5], entries, false),
            vec![Keep, DropShadowed, Keep, DropShadowed]
        );
        assert_eq!(
            run(vec![6, 5], entries, false),
            vec![Keep, Keep, Keep, DropShadowed]
        );
    }

    #[test]
    fn tombstones_go_only_at_the_bottom_and_only_in_the_oldest_stripe() {
        use Decision::*;
        let entries: &[(&[u8], SeqNo, ValueKind)] =
            &[(b"a", 9, ValueKind::Deletion), (b"a", 4, ValueKind::Value)];
        assert_eq!(
            run(vec![], entries, true),
            vec![DropTombstone, DropShadowed]
        );
        assert_eq!(run(vec![], entries, false), vec![Keep, DropShadowed]);
        assert_eq!(run(vec![5], entries, true), vec![Keep, Keep]);
    }
}
