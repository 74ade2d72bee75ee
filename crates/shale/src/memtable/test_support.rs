//! Helpers shared by the memtables' model tests.

use crate::key;
use proptest::prelude::*;
use std::cmp::Reverse;

/// The model's order for internal keys: user key ascending, then trailer descending.
pub(crate) type ModelKey = (Vec<u8>, Reverse<u64>);

pub(crate) fn model_key(ikey: &[u8]) -> ModelKey {
    (key::user_key(ikey).to_vec(), Reverse(key::trailer(ikey)))
}

pub(crate) fn ikey_of(k: &ModelKey) -> Vec<u8> {
    let mut ikey = k.0.clone();
    ikey.extend_from_slice(&k.1 .0.to_le_bytes());
    ikey
}

/// Short keys over a tiny alphabet, so versions of one key and neighbours are common.
pub(crate) fn small_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0u8..4, 0..4)
}
