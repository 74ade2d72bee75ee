//! Expiry: keys found expired on read are deleted after their batch, and a bounded background
//! sweep walks the expiry index for keys nobody reads.
//!
//! Both paths lock the key's stripe and re-read its meta record before deleting, so a key that
//! was rewritten in between (a new value, a new expiry) is left alone.

use super::format;
use super::{keys, now_ms, Store, StripeSet};
use std::ops::Bound;

/// Most expiry index entries one sweep visits.
pub const SWEEP_BATCH: usize = 512;

/// Deletes those of `keys` (physical db, user key) that are still expired.
///
/// # Errors
/// The engine's error.
pub fn delete_expired(store: &Store, keys: &[(u8, Vec<u8>)]) -> super::Result<usize> {
    let mut deleted = 0;
    for (db, key) in keys {
        let mut stripes = StripeSet::new();
        stripes.add(key);
        let mut txn = store.txn(&stripes);
        txn.select(store.logical(*db));
        if let Some(meta) = txn.meta_even_expired_in(*db, key)? {
            if meta.is_expired(txn.now_ms()) {
                keys::delete(&mut txn, key, &meta)?;
                deleted += 1;
            }
        }
        txn.commit()?;
    }
    Ok(deleted)
}

/// Visits up to [`SWEEP_BATCH`] entries of the expiry index that are due, deleting expired keys
/// and stale entries. Returns how many keys it deleted.
///
/// # Errors
/// The engine's error.
pub fn sweep(store: &Store) -> super::Result<usize> {
    if !store.may_have_expiring_keys() {
        return Ok(0);
    }
    let now = now_ms();
    let mut due = Vec::new();
    let lo = vec![format::EXPIRY];
    let hi = format::expiry_key(now.saturating_add(1), 0, b"");
    for item in store.db().range((Bound::Included(lo), Bound::Excluded(hi))) {
        let (k, _) = item?;
        if let Some((at, db, key)) = format::split_expiry_key(&k) {
            due.push((at, db, key.to_vec()));
        }
        if due.len() >= SWEEP_BATCH {
            break;
        }
    }
    let mut deleted = 0;
    for (at, db, key) in due {
        let mut stripes = StripeSet::new();
        stripes.add(&key);
        let mut txn = store.txn(&stripes);
        txn.select(store.logical(db));
        match txn.meta_even_expired_in(db, &key)? {
            Some(meta) if meta.expire_at == at && meta.is_expired(now) => {
                keys::delete(&mut txn, &key, &meta)?;
                deleted += 1;
            }
            _ => txn.delete(format::expiry_key(at, db, &key)),
        }
        txn.commit()?;
    }
    Ok(deleted)
}
