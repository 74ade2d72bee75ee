//! Lists: one engine record per element, keyed by its position under the list's generation; the
//! meta record keeps the length and the position of the first element (`head`), so the list
//! occupies positions `head..head + len`. A push at either end writes one element and the meta
//! record; LINDEX and LSET touch one element; LRANGE is one engine iteration over a position
//! range. LINSERT and LREM shift the shorter side (O(n), as in Redis); LTRIM deletes by position
//! without reading the elements.

use super::format::{self, Kind, Meta};
use super::{keys, strings, Dir, Error, Result, Txn};
use bytes::Bytes;
use std::ops::Bound;

/// The end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (LPUSH, LPOP).
    Left,
    /// The tail (RPUSH, RPOP).
    Right,
}

/// The live list at `key` for a read.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn meta(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::List)
}

/// The number of elements.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn len(txn: &mut Txn<'_>, key: &[u8]) -> Result<u64> {
    Ok(meta(txn, key)?.map_or(0, |m| m.len))
}

/// A list element its meta record counts is not there: damage.
fn missing() -> Error {
    Error::Engine(shale::Error::new(
        shale::ErrorKind::Corruption,
        "a list element is missing",
    ))
}

fn position(m: &Meta, index: u64) -> u64 {
    m.head.wrapping_add(index)
}

/// The index (from the head) of `i`, where negative counts from the tail; `None` when outside.
fn resolve_index(m: &Meta, i: i64) -> Option<u64> {
    let len = m.len as i64;
    let i = if i < 0 { len + i } else { i };
    (0..len).contains(&i).then_some(i as u64)
}

/// LPUSH / RPUSH (and the X forms with `only_existing`): pushes `values` one by one at `end`;
/// returns the new length (0 when `only_existing` found no list).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn push(
    txn: &mut Txn<'_>,
    key: &[u8],
    values: &[Bytes],
    end: End,
    only_existing: bool,
) -> Result<u64> {
    let existing = keys::typed_write(txn, key, Kind::List)?;
    if existing.is_none() && only_existing {
        return Ok(0);
    }
    let created = existing.is_none();
    let mut m = match existing {
        Some(m) => m,
        None => Meta::collection(Kind::List, txn.new_generation()),
    };
    for v in values {
        push_one(txn, &mut m, v.clone(), end);
    }
    keys::store_collection(txn, key, &m, created);
    Ok(m.len)
}

fn push_one(txn: &mut Txn<'_>, m: &mut Meta, value: Bytes, end: End) {
    let at = match end {
        End::Left => {
            m.head = m.head.wrapping_sub(1);
            m.head
        }
        End::Right => position(m, m.len),
    };
    txn.put(format::list_key(m.generation, at), value);
    m.len += 1;
}

/// Reads up to `count` elements from `end` of the list `m` (one iteration).
fn read_from_end(txn: &mut Txn<'_>, m: &Meta, count: u64, end: End) -> Result<Vec<Vec<u8>>> {
    let count = count.min(m.len);
    let (first, dir) = match end {
        End::Left => (0, Dir::Forward),
        End::Right => (m.len - count, Dir::Backward),
    };
    read_indexes(txn, m, first, count, dir)
}

/// Up to this many elements are read by position with one `multi_get` rather than by an
/// iteration: a pop or a short range is then point reads, which a busy memtable serves without
/// building a cursor.
const POINT_READ_MAX: u64 = 16;

/// Reads elements at indexes `first..first + count` in direction `dir`: by position for a few,
/// one iteration for more.
fn read_indexes(
    txn: &mut Txn<'_>,
    m: &Meta,
    first: u64,
    count: u64,
    dir: Dir,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
    if count == 0 {
        return Ok(out);
    }
    if count <= POINT_READ_MAX {
        let mut keys: Vec<Vec<u8>> = (first..first + count)
            .map(|i| format::list_key(m.generation, position(m, i)))
            .collect();
        if dir == Dir::Backward {
            keys.reverse();
        }
        for v in txn.get_many(&keys)? {
            out.push(v.ok_or_else(missing)?);
        }
        return Ok(out);
    }
    let lo = format::list_key(m.generation, position(m, first));
    let hi = format::list_key(m.generation, position(m, first + count - 1));
    txn.scan(Bound::Included(lo), Bound::Included(hi), dir, |_, v| {
        out.push(v.to_vec());
        true
    })?;
    Ok(out)
}

/// LPOP / RPOP: removes and returns up to `count` elements from `end`; `None` when there is no
/// list.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn pop(txn: &mut Txn<'_>, key: &[u8], count: u64, end: End) -> Result<Option<Vec<Vec<u8>>>> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::List)? else {
        return Ok(None);
    };
    let values = pop_from(txn, &mut m, count, end)?;
    keys::store_collection(txn, key, &m, false);
    Ok(Some(values))
}

fn pop_from(txn: &mut Txn<'_>, m: &mut Meta, count: u64, end: End) -> Result<Vec<Vec<u8>>> {
    let values = read_from_end(txn, m, count, end)?;
    let n = values.len() as u64;
    for i in 0..n {
        let index = match end {
            End::Left => i,
            End::Right => m.len - 1 - i,
        };
        txn.delete(format::list_key(m.generation, position(m, index)));
    }
    if end == End::Left {
        m.head = m.head.wrapping_add(n);
    }
    m.len -= n;
    Ok(values)
}

/// LRANGE: the elements at indexes `start..=stop` (negative from the tail), one iteration.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn range(txn: &mut Txn<'_>, key: &[u8], start: i64, stop: i64) -> Result<Vec<Vec<u8>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    match strings::resolve_range(start, stop, m.len) {
        Some((first, count)) => read_indexes(txn, &m, first, count, Dir::Forward),
        None => Ok(Vec::new()),
    }
}

/// LINDEX: the element at index `i` (negative from the tail).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn index(txn: &mut Txn<'_>, key: &[u8], i: i64) -> Result<Option<Vec<u8>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(None);
    };
    match resolve_index(&m, i) {
        Some(at) => Ok(txn.get(&format::list_key(m.generation, position(&m, at)))?),
        None => Ok(None),
    }
}

/// LSET: replaces the element at index `i`.
///
/// # Errors
/// `ERR no such key`; `ERR index out of range`; [`Error::WrongType`]; the engine's error.
pub fn set(txn: &mut Txn<'_>, key: &[u8], i: i64, value: &Bytes) -> Result<()> {
    let Some(m) = keys::typed_write(txn, key, Kind::List)? else {
        return Err(Error::reply("ERR no such key"));
    };
    let at = resolve_index(&m, i).ok_or_else(|| Error::reply("ERR index out of range"))?;
    txn.put(
        format::list_key(m.generation, position(&m, at)),
        value.clone(),
    );
    txn.touch(key, false);
    Ok(())
}

/// Every element of the list `m`, head first (one iteration).
fn read_all(txn: &mut Txn<'_>, m: &Meta) -> Result<Vec<Vec<u8>>> {
    read_indexes(txn, m, 0, m.len, Dir::Forward)
}

/// Rewrites the list `m` as `values`: the elements that stay at their index are not rewritten
/// when the change is at the tail side; otherwise the list moves to a fresh head. Returns the
/// new meta (not yet stored).
fn rewrite(txn: &mut Txn<'_>, m: &Meta, old: &[Vec<u8>], values: Vec<Vec<u8>>) -> Meta {
    let same_prefix = old.iter().zip(&values).take_while(|(a, b)| a == b).count();
    for i in same_prefix..old.len() {
        txn.delete(format::list_key(m.generation, position(m, i as u64)));
    }
    let mut new = m.clone();
    for (i, v) in values.iter().enumerate().skip(same_prefix) {
        txn.put(
            format::list_key(m.generation, position(m, i as u64)),
            v.clone(),
        );
    }
    new.len = values.len() as u64;
    new
}

/// LINSERT: inserts `value` before (or after) the first element equal to `pivot`; returns the
/// new length, -1 when the pivot is absent, 0 when there is no list.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn insert(
    txn: &mut Txn<'_>,
    key: &[u8],
    before: bool,
    pivot: &[u8],
    value: &[u8],
) -> Result<i64> {
    let Some(m) = keys::typed_write(txn, key, Kind::List)? else {
        return Ok(0);
    };
    let old = read_all(txn, &m)?;
    let Some(p) = old.iter().position(|v| v.as_slice() == pivot) else {
        return Ok(-1);
    };
    let at = if before { p } else { p + 1 };
    let new = if at < old.len() - at {
        // Shift the head side one position left.
        let mut m2 = m.clone();
        m2.head = m.head.wrapping_sub(1);
        for (i, v) in old.iter().take(at).enumerate() {
            txn.put(
                format::list_key(m.generation, position(&m2, i as u64)),
                v.clone(),
            );
        }
        txn.put(
            format::list_key(m.generation, position(&m2, at as u64)),
            value.to_vec(),
        );
        m2.len += 1;
        m2
    } else {
        let mut values = old.clone();
        values.insert(at, value.to_vec());
        rewrite(txn, &m, &old, values)
    };
    keys::store_collection(txn, key, &new, false);
    Ok(new.len as i64)
}

/// LREM: removes up to `count` elements equal to `value` (`count > 0` from the head, `< 0` from
/// the tail, 0 all); returns how many.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn remove(txn: &mut Txn<'_>, key: &[u8], count: i64, value: &[u8]) -> Result<u64> {
    let Some(m) = keys::typed_write(txn, key, Kind::List)? else {
        return Ok(0);
    };
    let old = read_all(txn, &m)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut doomed = vec![false; old.len()];
    let mut removed = 0usize;
    let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
        Box::new((0..old.len()).rev())
    } else {
        Box::new(0..old.len())
    };
    for i in order {
        if removed == limit {
            break;
        }
        if old[i].as_slice() == value {
            doomed[i] = true;
            removed += 1;
        }
    }
    if removed == 0 {
        return Ok(0);
    }
    let values: Vec<Vec<u8>> = old
        .iter()
        .zip(&doomed)
        .filter(|(_, d)| !**d)
        .map(|(v, _)| v.clone())
        .collect();
    let new = rewrite(txn, &m, &old, values);
    keys::store_collection(txn, key, &new, false);
    Ok(removed as u64)
}

/// LTRIM: keeps the elements at indexes `start..=stop` only (deleting by position, no read).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn trim(txn: &mut Txn<'_>, key: &[u8], start: i64, stop: i64) -> Result<()> {
    let Some(m) = keys::typed_write(txn, key, Kind::List)? else {
        return Ok(());
    };
    let (first, count) = strings::resolve_range(start, stop, m.len).unwrap_or((0, 0));
    for i in (0..first).chain(first + count..m.len) {
        txn.delete(format::list_key(m.generation, position(&m, i)));
    }
    if count == m.len {
        return Ok(());
    }
    let mut new = m.clone();
    new.head = position(&m, first);
    new.len = count;
    keys::store_collection(txn, key, &new, false);
    Ok(())
}

/// LPOS's options.
#[derive(Debug, Clone, Copy)]
pub struct PosOptions {
    /// Skip to the `rank`-th match (negative: from the tail).
    pub rank: i64,
    /// Most matches returned (0: all).
    pub count: u64,
    /// Most elements compared (0: all).
    pub maxlen: u64,
}

/// LPOS: the indexes of elements equal to `value`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn positions(
    txn: &mut Txn<'_>,
    key: &[u8],
    value: &[u8],
    options: PosOptions,
) -> Result<Vec<u64>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let from_tail = options.rank < 0;
    let mut skip = options.rank.unsigned_abs().saturating_sub(1);
    let wanted = if options.count == 0 {
        u64::MAX
    } else {
        options.count
    };
    let maxlen = if options.maxlen == 0 {
        u64::MAX
    } else {
        options.maxlen
    };
    let mut out = Vec::new();
    let mut compared = 0u64;
    let dir = if from_tail {
        Dir::Backward
    } else {
        Dir::Forward
    };
    let prefix = format::collection_prefix(format::LIST_ITEM, m.generation);
    txn.scan_prefix(&prefix, dir, |k, v| {
        if compared == maxlen {
            return false;
        }
        compared += 1;
        if v == value {
            if skip > 0 {
                skip -= 1;
            } else if let Some(pos) = format::split_list_key(k) {
                out.push(pos.wrapping_sub(m.head));
            }
        }
        (out.len() as u64) < wanted
    })?;
    Ok(out)
}

/// LMOVE: pops from `from` of `src` and pushes at `to` of `dst`; returns the element (`None`
/// when `src` has none).
///
/// # Errors
/// [`Error::WrongType`] for either key; the engine's error.
pub fn move_element(
    txn: &mut Txn<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>> {
    let Some(mut sm) = keys::typed_write(txn, src, Kind::List)? else {
        return Ok(None);
    };
    // The destination's type is checked before anything changes.
    if src != dst {
        keys::typed_write(txn, dst, Kind::List)?;
    }
    let mut values = pop_from(txn, &mut sm, 1, from)?;
    let Some(value) = values.pop() else {
        return Ok(None);
    };
    if src == dst {
        push_one(txn, &mut sm, Bytes::from(value.clone()), to);
        keys::store_collection(txn, src, &sm, false);
        return Ok(Some(value));
    }
    keys::store_collection(txn, src, &sm, false);
    push(txn, dst, &[Bytes::from(value.clone())], to, false)?;
    Ok(Some(value))
}
