//! A linearizability checker for a history of reads and writes of registers (one per key),
//! after Wing and Gong, with Lowe's memoization (the "WGL" search that Porcupine and Knossos
//! also run).
//!
//! A history records each client operation's invocation and response times. An operation whose
//! outcome is unknown (a timeout, a connection cut) has no response: it may have taken effect at
//! any time after its invocation, or never. The history is linearizable when the operations can
//! be ordered so that each takes effect at one instant between its invocation and its response
//! and every read returns the value of the last write before it (or the initial value).
//!
//! Keys are independent registers: each key's operations are checked on their own
//! (linearizability is compositional).

use std::collections::{BTreeMap, HashSet};

/// What an operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Wrote this value.
    Write(Vec<u8>),
    /// Read and got this value (`None`: the key was absent).
    Read(Option<Vec<u8>>),
}

/// One client operation on one key.
#[derive(Debug, Clone)]
pub struct Event {
    pub key: Vec<u8>,
    pub op: Op,
    /// When the client sent it (any monotonic clock, e.g. nanoseconds since the test began).
    pub invoked: u64,
    /// When the answer arrived; `None` when the outcome is unknown (only meaningful for writes:
    /// a read without an answer constrains nothing and is ignored).
    pub returned: Option<u64>,
}

/// The verdict for a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Some order explains every operation.
    Linearizable,
    /// No order explains the operations of this key.
    Violation { key: Vec<u8>, operations: usize },
    /// The search gave up on this key (too many interleavings to try).
    Unknown { key: Vec<u8> },
}

/// Search steps allowed per key before giving up.
pub const MAX_STEPS_PER_KEY: u64 = 20_000_000;

/// Most memoized configurations per key before the search gives up.
pub const MAX_MEMO_PER_KEY: usize = 2_000_000;

/// Checks `history`; keys are checked in order and the first that fails decides.
///
/// Writes of unknown outcome are simplified first, without changing the verdict: one whose
/// value no read returned is dropped (any order that applies it can apply the next write right
/// after it instead, or nothing when none follows), and one whose value a read returned took
/// effect before that read answered, so it gets the earliest such answer as its response. Values
/// must be unique per key for this (every test writes unique values).
pub fn check(history: &[Event]) -> Verdict {
    let mut by_key: BTreeMap<&[u8], Vec<Event>> = BTreeMap::new();
    for e in history {
        if matches!(e.op, Op::Read(_)) && e.returned.is_none() {
            continue;
        }
        by_key.entry(&e.key).or_default().push(e.clone());
    }
    for (key, mut events) in by_key {
        let mut first_seen: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        for e in &events {
            if let (Op::Read(Some(v)), Some(r)) = (&e.op, e.returned) {
                let at = first_seen.entry(v.clone()).or_insert(r);
                *at = (*at).min(r);
            }
        }
        events.retain_mut(|e| match (&e.op, e.returned) {
            (Op::Write(v), None) => match first_seen.get(v) {
                Some(&r) => {
                    e.returned = Some(r.max(e.invoked));
                    true
                }
                None => false,
            },
            _ => true,
        });
        let events: Vec<&Event> = events.iter().collect();
        match check_register(&events) {
            Some(true) => {}
            Some(false) => {
                return Verdict::Violation {
                    key: key.to_vec(),
                    operations: events.len(),
                }
            }
            None => return Verdict::Unknown { key: key.to_vec() },
        }
    }
    Verdict::Linearizable
}

/// One register's operations: `Some(true)` linearizable, `Some(false)` not, `None` gave up.
fn check_register(events: &[&Event]) -> Option<bool> {
    let n = events.len();
    let ret = |i: usize| events[i].returned.unwrap_or(u64::MAX);
    // Values are interned so that the state is a small integer (0: absent).
    let mut values: Vec<&[u8]> = Vec::new();
    let mut ops: Vec<(bool, u32)> = Vec::with_capacity(n);
    for e in events {
        let (write, v) = match &e.op {
            Op::Write(v) => (true, Some(v.as_slice())),
            Op::Read(v) => (false, v.as_deref()),
        };
        let id = match v {
            None => 0,
            Some(v) => match values.iter().position(|x| *x == v) {
                Some(i) => i as u32 + 1,
                None => {
                    values.push(v);
                    values.len() as u32
                }
            },
        };
        ops.push((write, id));
    }
    let must: Vec<usize> = (0..n).filter(|&i| events[i].returned.is_some()).collect();
    let words = n.div_ceil(64);
    let mut done = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, u32)> = HashSet::new();
    let mut steps = 0u64;
    // Depth-first search; the stack holds (op linearized, state before it).
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut state = 0u32;
    let mut next_try = 0usize;
    let is_done = |done: &[u64], i: usize| done[i / 64] >> (i % 64) & 1 == 1;
    loop {
        steps += 1;
        if steps > MAX_STEPS_PER_KEY {
            return None;
        }
        if must.iter().all(|&i| is_done(&done, i)) {
            return Some(true);
        }
        // The earliest response among the completed operations not yet linearized: an operation
        // invoked after it cannot come next.
        let horizon = (0..n)
            .filter(|&i| !is_done(&done, i))
            .map(ret)
            .min()
            .unwrap_or(u64::MAX);
        let mut advanced = false;
        let mut i = next_try;
        while i < n {
            if !is_done(&done, i) && events[i].invoked <= horizon {
                let (write, v) = ops[i];
                let ok = write || v == state;
                let after = if write { v } else { state };
                if ok {
                    done[i / 64] |= 1 << (i % 64);
                    if seen.len() >= MAX_MEMO_PER_KEY {
                        return None;
                    }
                    if seen.insert((done.clone(), after)) {
                        stack.push((i, state));
                        state = after;
                        next_try = 0;
                        advanced = true;
                        break;
                    }
                    done[i / 64] &= !(1 << (i % 64));
                }
            }
            i += 1;
        }
        if advanced {
            continue;
        }
        // Backtrack.
        let Some((last, before)) = stack.pop() else {
            return Some(false);
        };
        done[last / 64] &= !(1 << (last % 64));
        state = before;
        next_try = last + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: &str, invoked: u64, returned: Option<u64>) -> Event {
        Event {
            key: b"k".to_vec(),
            op: Op::Write(v.as_bytes().to_vec()),
            invoked,
            returned,
        }
    }

    fn r(v: Option<&str>, invoked: u64, returned: u64) -> Event {
        Event {
            key: b"k".to_vec(),
            op: Op::Read(v.map(|v| v.as_bytes().to_vec())),
            invoked,
            returned: Some(returned),
        }
    }

    #[test]
    fn sequential_and_overlapping_histories_pass() {
        assert_eq!(check(&[]), Verdict::Linearizable);
        assert_eq!(
            check(&[r(None, 0, 1), w("a", 2, Some(3)), r(Some("a"), 4, 5)]),
            Verdict::Linearizable
        );
        // A read overlapping a write may see either value.
        for seen in [None, Some("a")] {
            assert_eq!(
                check(&[w("a", 0, Some(10)), r(seen, 1, 2)]),
                Verdict::Linearizable
            );
        }
        // Two overlapping writes, then reads agreeing on one order.
        let h = [
            w("a", 0, Some(10)),
            w("b", 1, Some(9)),
            r(Some("a"), 11, 12),
            r(Some("a"), 13, 14),
        ];
        assert_eq!(check(&h), Verdict::Linearizable);
    }

    #[test]
    fn a_stale_read_is_rejected() {
        // "b" was acknowledged before the read began, yet the read returned "a".
        let h = [w("a", 0, Some(1)), w("b", 2, Some(3)), r(Some("a"), 4, 5)];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
        // Reads may not go back in time: after one saw "b", a later one may not see "a".
        let h = [
            w("a", 0, Some(1)),
            w("b", 2, Some(20)),
            r(Some("b"), 3, 4),
            r(Some("a"), 5, 6),
        ];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
    }

    #[test]
    fn a_lost_write_is_rejected() {
        // An acknowledged write that no later read sees.
        let h = [w("a", 0, Some(1)), r(None, 2, 3)];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
        // A value nobody wrote.
        let h = [w("a", 0, Some(1)), r(Some("z"), 2, 3)];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
    }

    #[test]
    fn a_write_of_unknown_outcome_may_or_may_not_have_happened() {
        for seen in [Some("a"), Some("b")] {
            let h = [w("a", 0, Some(1)), w("b", 2, None), r(seen, 10, 11)];
            assert_eq!(check(&h), Verdict::Linearizable);
        }
        // But once a read saw it, a later read may not miss it.
        let h = [
            w("a", 0, Some(1)),
            w("b", 2, None),
            r(Some("b"), 10, 11),
            r(Some("a"), 12, 13),
        ];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
        // And it cannot take effect before it was sent.
        let h = [w("a", 0, Some(1)), r(Some("b"), 2, 3), w("b", 4, None)];
        assert!(matches!(check(&h), Verdict::Violation { .. }));
    }

    #[test]
    fn keys_are_independent_registers() {
        let mut h = vec![w("a", 0, Some(1))];
        h.push(Event {
            key: b"other".to_vec(),
            op: Op::Read(None),
            invoked: 2,
            returned: Some(3),
        });
        h.push(r(Some("a"), 4, 5));
        assert_eq!(check(&h), Verdict::Linearizable);
    }

    #[test]
    fn many_concurrent_writes_are_checked_quickly() {
        let mut h = Vec::new();
        for i in 0..12u64 {
            h.push(w(&format!("v{i}"), i, Some(100 + i)));
        }
        h.push(r(Some("v7"), 200, 201));
        h.push(r(Some("v7"), 202, 203));
        assert_eq!(check(&h), Verdict::Linearizable);
        h.push(r(Some("v8"), 204, 205));
        assert!(matches!(check(&h), Verdict::Violation { .. }));
    }
}
