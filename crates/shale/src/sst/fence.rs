//! Fence keys: a compact in-memory copy of the index block's keys, for point lookups.
//!
//! Binary search over the index block reads a restart offset and then the key it points to at
//! every step: two dependent cache misses a step, spread over the whole index block (hundreds of
//! kilobytes for a 64 MiB table), about fifteen steps per lookup. The fence keeps, for index entry
//! `i`, the 8 bytes of its user key that follow the prefix shared by every key of the table, as a
//! big-endian `u64` (zero-padded). The search runs over that dense array and reads the index block
//! only to separate entries whose 8 bytes are equal.
//!
//! Why it is exact: for two user keys that both start with the shared prefix, a smaller fence
//! value means a smaller key (the bytes compared first are the ones kept; a key that ends early
//! is padded with zeros and is a prefix of, so smaller than, any longer key with the same
//! bytes). So the index entries whose fence value is below the target's all hold smaller user
//! keys, those above it larger ones, and only entries with an equal value need their key.
//!
//! Built at open from the index block, which [`super::table`] has already validated. Immutable.

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    /// The user-key prefix every index key shares.
    prefix: Vec<u8>,
    /// Fence value of index entry `i`; non-decreasing.
    values: Vec<u64>,
}

/// Where the first index entry at or after a target lies.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Exactly this entry (the number of entries when every entry sorts before the target).
    At(usize),
    /// Somewhere in `lo..=hi`: entries `lo..hi` share the target's fence value and need a key
    /// comparison; `hi` is the answer when all of them sort before the target.
    Between(usize, usize),
    /// The target does not start with the shared prefix: search the index block.
    Unknown,
}

/// The fence value of `user_key` after `skip` bytes.
#[inline]
fn value(user_key: &[u8], skip: usize) -> u64 {
    let mut bytes = [0u8; 8];
    let rest = user_key.get(skip..).unwrap_or(&[]);
    let n = rest.len().min(8);
    bytes[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(bytes)
}

impl Fence {
    /// The fence over index user keys `keys`, given in index order (sorted). `first` and `last`
    /// are the first and last of them (their shared prefix is everyone's).
    pub(crate) fn build<'a>(
        first: &[u8],
        last: &[u8],
        keys: impl Iterator<Item = &'a [u8]>,
    ) -> Fence {
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        Fence {
            prefix: first[..shared].to_vec(),
            values: keys.map(|k| value(k, shared)).collect(),
        }
    }

    /// Number of index entries covered.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// Where the first index entry whose user key is at or after `user_key` lies.
    #[inline]
    pub(crate) fn position(&self, user_key: &[u8]) -> Position {
        if !user_key.starts_with(&self.prefix) {
            return Position::Unknown;
        }
        let t = value(user_key, self.prefix.len());
        let lo = lower_bound(&self.values, t);
        let hi = lo + equal_run(&self.values[lo..], t);
        if lo == hi {
            Position::At(lo)
        } else {
            Position::Between(lo, hi)
        }
    }
}

/// The index of the first of `values` (sorted) not below `t`, or `values.len()`.
///
/// A binary search over a large array is a chain of dependent cache misses. This one has no
/// branch on the comparison, and each step starts loading both elements the next step may read,
/// so the next step's miss overlaps this one's.
#[inline]
fn lower_bound(values: &[u64], t: u64) -> usize {
    if values.is_empty() {
        return 0;
    }
    // INVARIANT: the answer lies in `base..=base + size` and every element before `base` is
    // below `t`.
    let mut base = 0;
    let mut size = values.len();
    while size > 1 {
        let half = size / 2;
        let next = (size - half) / 2;
        crate::memtable::prefetch(&values[base + next]);
        crate::memtable::prefetch(&values[base + half + next]);
        if values[base + half] < t {
            base += half;
        }
        size -= half;
    }
    base + usize::from(values[base] < t)
}

/// How many of `values`' first elements equal `t`, given that none is smaller. Runs of equal
/// fence values are short, and `values[0]` was the last element the search before looked at, so a
/// gallop from the front costs one or two loads where a second binary search over the rest of the
/// array would cost a dozen cache misses.
#[inline]
fn equal_run(values: &[u64], t: u64) -> usize {
    if values.first() != Some(&t) {
        return 0;
    }
    // INVARIANT: values[..known] all equal `t`.
    let mut known = 1;
    let mut step = 1;
    while known + step <= values.len() && values[known + step - 1] == t {
        known += step;
        step *= 2;
    }
    let upper = (known + step).min(values.len());
    known + values[known..upper].partition_point(|&v| v == t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_matches_partition_point() {
        for len in 0..70usize {
            let values: Vec<u64> = (0..len as u64).map(|i| i / 3 * 2).collect();
            for t in 0..(len as u64 + 3) {
                assert_eq!(
                    lower_bound(&values, t),
                    values.partition_point(|&v| v < t),
                    "len {len} t {t}"
                );
            }
        }
    }

    #[test]
    fn equal_runs_are_counted_exactly() {
        for len in 0..40 {
            for run in 0..=len {
                let values: Vec<u64> = (0..len).map(|i| if i < run { 5 } else { 9 }).collect();
                assert_eq!(equal_run(&values, 5), run, "len {len} run {run}");
            }
        }
    }

    fn fence(keys: &[&[u8]]) -> Fence {
        Fence::build(keys[0], keys[keys.len() - 1], keys.iter().copied())
    }

    /// The reference: the first key at or after the target, by plain comparison.
    fn first_at_or_after(keys: &[&[u8]], target: &[u8]) -> usize {
        keys.partition_point(|k| *k < target)
    }

    fn check(keys: &[&[u8]], target: &[u8]) {
        let f = fence(keys);
        let want = first_at_or_after(keys, target);
        match f.position(target) {
            Position::At(i) => assert_eq!(i, want, "target {target:?}"),
            Position::Between(lo, hi) => {
                assert!(lo < hi && lo <= want && want <= hi, "target {target:?}");
                assert!(keys[lo..hi]
                    .iter()
                    .all(|k| value(k, f.prefix.len()) == value(target, f.prefix.len())));
            }
            Position::Unknown => assert!(!target.starts_with(&f.prefix), "target {target:?}"),
        }
    }

    #[test]
    fn positions_match_a_plain_search() {
        let keys: Vec<&[u8]> = vec![
            b"user:0001",
            b"user:0001aaaaaaaaaaaa1",
            b"user:0001aaaaaaaaaaaa2",
            b"user:0002",
            b"user:00020",
            b"user:1",
            b"user:9999999999",
        ];
        for t in [
            &b"user:"[..],
            b"user:0",
            b"user:0001",
            b"user:0001\0",
            b"user:0001aaaaaaaaaaaa",
            b"user:0001aaaaaaaaaaaa15",
            b"user:0001aaaaaaaaaaaa3",
            b"user:0002",
            b"user:00020",
            b"user:000200",
            b"user:5",
            b"user:9999999999",
            b"user:99999999990",
            b"user;",
            b"a",
            b"",
        ] {
            check(&keys, t);
        }
    }

    #[test]
    fn a_single_key_and_keys_without_a_shared_prefix() {
        check(&[b"k"], b"k");
        check(&[b"k"], b"j");
        check(&[b"k"], b"l");
        let keys: Vec<&[u8]> = vec![b"", b"a", b"b\xff", b"c"];
        for t in [&b""[..], b"a", b"a\0", b"b", b"b\xff", b"b\xff\0", b"d"] {
            check(&keys, t);
        }
    }

    #[test]
    fn random_keys_agree_with_a_plain_search() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..200 {
            let mut owned: Vec<Vec<u8>> = (0..1 + next() % 40)
                .map(|_| {
                    let len = 3 + (next() % 14) as usize;
                    let mut k = b"pre".to_vec();
                    k.extend((3..len).map(|_| b"\0az\xff"[(next() % 4) as usize]));
                    k
                })
                .collect();
            owned.sort();
            owned.dedup();
            let keys: Vec<&[u8]> = owned.iter().map(|k| &k[..]).collect();
            for _ in 0..20 {
                let len = (next() % 16) as usize;
                let t: Vec<u8> = (0..len)
                    .map(|i| {
                        if i < 3 {
                            b"pre"[i]
                        } else {
                            b"\0az\xff"[(next() % 4) as usize]
                        }
                    })
                    .collect();
                check(&keys, &t);
            }
        }
    }
}
