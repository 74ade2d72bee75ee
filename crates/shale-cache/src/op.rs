//! Jobs: what a connection thread asks of the scheduler, and what it gets back.
//!
//! A request becomes one [`Op`] per key. A thread collects its ops in a [`Jobs`] list in
//! request order, with the keys copied into one buffer; the scheduler fills in each op's
//! [`Outcome`]. Ops of one list are executed in list order, and a pass executes lists one after
//! the other, so the outcome of every op is the one it would have had run alone in that order.

use crate::index::{KeyHash, Location};

/// What to do with an item the thread has already written (a SET of some kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMode {
    /// Store it (memcached `set`, Redis SET).
    Always,
    /// Store it only if the key is absent (`add`, SET NX).
    Add,
    /// Store it only if the key is present (`replace`, SET XX).
    Replace,
    /// Store it only if the present item has this CAS version (`cas`).
    Cas(u64),
    /// meta `ms ... C<cas> I`: as [`SetMode::Cas`], but a present item of a newer version is
    /// replaced all the same, the new item marked stale with the old one's expiry (memcached's
    /// invalidation: a late writer's value is kept but flagged for recaching).
    CasOrStale(u64),
    /// Append its value to the present item's (`append`).
    Append,
    /// Prepend its value to the present item's (`prepend`).
    Prepend,
    /// meta `ms ... MA C<cas>` / `MP`: append (or prepend) only if the present item has this CAS
    /// version.
    CasAppend {
        /// The required version.
        cas: u64,
        /// Prepend instead.
        prepend: bool,
    },
}

/// Whose rules an increment follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncrStyle {
    /// memcached: the value is an unsigned 64-bit decimal; `incr` wraps, `decr` stops at 0; an
    /// absent key is not found.
    Memcached,
    /// Redis: a signed 64-bit decimal; overflow is an error; an absent key counts as 0.
    Redis,
}

/// `expire_ms` of [`OpKind::MetaDelete`] that keeps the item's expiry.
pub const KEEP_EXPIRY: u64 = u64::MAX;

/// One operation on one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Look the key up; the connection thread reads the located item.
    Get,
    /// Store the item written at `loc` (its key is the op's key).
    Set {
        /// The new item.
        loc: Location,
        /// Under which condition.
        mode: SetMode,
    },
    /// Remove the key.
    Delete,
    /// meta `md`: remove the key only if its CAS version is `cas` (0: any), or, with
    /// `invalidate`, keep it marked stale under a new CAS version, expiring at `expire_ms`
    /// ([`KEEP_EXPIRY`]: as before).
    MetaDelete {
        /// Required CAS version (0: any).
        cas: u64,
        /// Mark stale instead of removing.
        invalidate: bool,
        /// New expiry when invalidating.
        expire_ms: u64,
    },
    /// Set when the present item expires (memcached `touch`, Redis EXPIRE).
    Touch {
        /// The new expiry in cache-clock milliseconds ([`crate::item::NEVER`] for none).
        expire_ms: u64,
    },
    /// Add `delta` (or subtract it) to the decimal number the item holds.
    Incr {
        /// How much.
        delta: u64,
        /// Subtract instead.
        decr: bool,
        /// Whose rules.
        style: IncrStyle,
        /// Required CAS version of the present item (0: any; meta `ma ... C<cas>`).
        cas: u64,
    },
    /// Forget every item (the key is empty).
    Flush,
}

/// The answer to one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not executed yet.
    Pending,
    /// GET: the item is at one of these locations, if at either (verify the key).
    Candidates([Location; 2]),
    /// GET: the item is at this location (verify the key).
    Item(Location),
    /// GET: absent.
    Miss,
    /// A SET of any mode stored its item.
    Stored,
    /// `add`/`replace`/`append`/`prepend` found the key in the wrong state.
    NotStored,
    /// `cas`: the item has another version.
    Exists,
    /// `cas`, `delete`, `touch`, memcached `incr`: no such key.
    NotFound,
    /// `delete` removed it.
    Deleted,
    /// `touch` changed the expiry.
    Touched,
    /// `incr`: the new value (memcached's, unsigned).
    Unsigned(u64),
    /// `incr`: the new value (Redis's, signed).
    Signed(i64),
    /// `incr`: the item does not hold a number of the right kind.
    NotANumber,
    /// `incr`: Redis overflow.
    Overflow,
    /// No memory for the new item.
    NoMemory,
    /// `flush` done.
    Flushed,
}

/// One op in a [`Jobs`] list.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// The key's hash.
    pub hash: KeyHash,
    /// The key: `keys[key.0 .. key.1]` of the list.
    pub key: (u32, u32),
    /// What to do.
    pub kind: OpKind,
    /// What happened (filled by the scheduler).
    pub outcome: Outcome,
    /// This op's search in the batch that runs it (scheduler scratch).
    pub(crate) search: u32,
}

/// Why a location is offered for eviction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictReason {
    /// Picked by a CLOCK sweep.
    Clock,
    /// Found expired by a reader; evicted only if it still is.
    Expired,
}

/// One thread's ops, in order, with their keys.
#[derive(Debug, Default)]
pub struct Jobs {
    /// The ops in request order.
    pub ops: Vec<Op>,
    /// Every op's key, back to back.
    pub keys: Vec<u8>,
    /// Locations to evict.
    pub evict: Vec<(Location, EvictReason)>,
}

/// Names an op in a thread's [`Jobs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub u32);

impl Jobs {
    /// Appends an op on `key`; returns its id.
    pub fn push(&mut self, key: &[u8], hash: KeyHash, kind: OpKind) -> OpId {
        let start = self.keys.len() as u32;
        self.keys.extend_from_slice(key);
        let id = OpId(self.ops.len() as u32);
        self.ops.push(Op {
            hash,
            key: (start, self.keys.len() as u32),
            kind,
            outcome: Outcome::Pending,
            search: 0,
        });
        id
    }

    /// The key of `op`.
    #[inline]
    pub fn key(&self, op: &Op) -> &[u8] {
        &self.keys[op.key.0 as usize..op.key.1 as usize]
    }

    /// Whether there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.evict.is_empty()
    }

    /// Empties the list, keeping its buffers.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.keys.clear();
        self.evict.clear();
    }
}
