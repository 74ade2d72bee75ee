//! [`KeyRange`]: the key ranges that [`Db::range`](crate::Db::range),
//! [`Snapshot::range`](crate::Snapshot::range) and [`Db::compact_range`](crate::Db::compact_range)
//! take.
//!
//! A signature over `RangeBounds<K>` cannot infer `K` for the full range `..`, which has no key
//! at all; so the range types get their own trait, implemented for each of Rust's range forms over
//! any key that is bytes (`&[u8]`, `&[u8; N]`, `Vec<u8>`, `&str`, `String`, ...), for the full
//! range, and for a pair of [`Bound`]s. Every form compiles without type annotations.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// A range of user keys. See the module documentation for the forms it takes.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = shale::Db::open(dir.path(), shale::Options::default()).unwrap();
/// db.put(b"apple", b"1").unwrap();
/// db.put(b"banana", b"2").unwrap();
/// assert_eq!(db.range(..).count(), 2);
/// assert_eq!(db.range(b"b".as_slice()..).count(), 1);
/// assert_eq!(db.range(b"a"..b"b").count(), 1);
/// assert_eq!(db.range("a"..="banana").count(), 2);
/// assert_eq!(db.range(b"apple".to_vec()..b"banana".to_vec()).count(), 1);
/// ```
pub trait KeyRange {
    /// The lower bound.
    fn start(&self) -> Bound<&[u8]>;
    /// The upper bound.
    fn end(&self) -> Bound<&[u8]>;
}

impl KeyRange for RangeFull {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
}

impl<K: AsRef<[u8]>> KeyRange for Range<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(self.start.as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Excluded(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeInclusive<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(RangeInclusive::start(self).as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Included(RangeInclusive::end(self).as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeFrom<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(self.start.as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeTo<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Excluded(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeToInclusive<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Included(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn start(&self) -> Bound<&[u8]> {
        as_bytes(&self.0)
    }
    fn end(&self) -> Bound<&[u8]> {
        as_bytes(&self.1)
    }
}

fn as_bytes<K: AsRef<[u8]>>(bound: &Bound<K>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Copies a range's bounds into owned user keys.
pub(crate) fn owned_bounds(range: &impl KeyRange) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    (
        range.start().map(<[u8]>::to_vec),
        range.end().map(<[u8]>::to_vec),
    )
}
