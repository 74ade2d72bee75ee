//! The batch contract of [`super`] as a test suite any backend can be run through.
//!
//! Every check takes a factory `make(slots) -> Box<dyn BatchIndex>` and panics with a message
//! naming the broken rule. [`contract_tests!`](crate::contract_tests) expands to one `#[test]`
//! per check for a backend:
//!
//! ```ignore
//! shale_cache::contract_tests!(cpu, |slots| Box::new(shale_cache::index::cpu::CpuIndex::new(slots).unwrap()));
//! ```
//!
//! The heart of the suite is [`Model`]: a `HashMap` from (bucket pair, signature) to location that
//! applies each batch as the contract says and checks the backend's answers against it. Lossy
//! drops make the index non-deterministic, so the model learns which entries a backend dropped
//! from `displaced` and checks that the report is complete and consistent: an entry that vanishes
//! without being reported is caught by a later search.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{BatchIndex, IndexBatch, IndexError, IndexResults, KeyHash, Location, TableShape};

/// A factory of empty backends holding at least the given number of slots.
pub type MakeIndex<'a> = &'a mut dyn FnMut(usize) -> Box<dyn BatchIndex>;

/// The entries an index must hold, keyed as the contract keys them.
#[derive(Debug)]
pub struct Model {
    shape: TableShape,
    // (pair, signature) -> (location, a key hash stored under it)
    entries: HashMap<(u32, u32), (Location, KeyHash)>,
    // location -> (pair, signature)
    by_location: HashMap<Location, (u32, u32)>,
}

impl Model {
    /// An empty model of a table with `slots` entries (the backend's [`BatchIndex::slots`]).
    pub fn new(slots: usize) -> Model {
        Model {
            shape: TableShape::for_slots(slots),
            entries: HashMap::new(),
            by_location: HashMap::new(),
        }
    }

    fn key(&self, hash: KeyHash) -> (u32, u32) {
        (self.shape.pair(hash), hash.signature())
    }

    /// The location the index must return for `hash`.
    pub fn search(&self, hash: KeyHash) -> Option<Location> {
        self.entries.get(&self.key(hash)).map(|&(loc, _)| loc)
    }

    /// Entries the index must hold.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the model is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `loc` is in the index.
    pub fn holds_location(&self, loc: Location) -> bool {
        self.by_location.contains_key(&loc)
    }

    /// Every entry: (a key hash stored under it, its location).
    pub fn entries(&self) -> Vec<(KeyHash, Location)> {
        let mut all: Vec<_> = self.entries.values().map(|&(l, h)| (h, l)).collect();
        all.sort_unstable();
        all
    }

    fn remove_location(&mut self, loc: Location) {
        if let Some(key) = self.by_location.remove(&loc) {
            self.entries.remove(&key);
        }
    }

    /// Checks `results` against the model for `batch`, then applies the batch.
    ///
    /// # Errors
    /// A description of the first broken rule.
    pub fn apply(&mut self, batch: &IndexBatch, results: &IndexResults) -> Result<(), String> {
        // Phase 1: searches see the index before the batch.
        if results.found.len() != batch.searches.len() {
            return Err(format!(
                "{} searches got {} answers",
                batch.searches.len(),
                results.found.len()
            ));
        }
        for (i, (&hash, &found)) in batch.searches.iter().zip(&results.found).enumerate() {
            let want = self.search(hash);
            let nonzero: Vec<Location> = found.iter().copied().filter(|&l| l != 0).collect();
            let ok = match want {
                None => nonzero.is_empty(),
                Some(loc) => nonzero == [loc],
            };
            if !ok {
                return Err(format!(
                    "search {i} of {hash:?} (pair {}, sig {:#x}) found {found:?}, want {want:?}",
                    self.shape.pair(hash),
                    hash.signature()
                ));
            }
        }
        // Phase 2: deletes match signature and location.
        for &(hash, loc) in &batch.deletes {
            let key = self.key(hash);
            if self.entries.get(&key).map(|&(l, _)| l) == Some(loc) {
                self.entries.remove(&key);
                self.by_location.remove(&loc);
            }
        }
        // Phase 3: inserts, grouped by (pair, signature); the old entry is a member of its group.
        let mut groups: BTreeMap<(u32, u32), (KeyHash, Vec<Location>)> = BTreeMap::new();
        for &(hash, loc) in &batch.inserts {
            let key = self.key(hash);
            let group = groups.entry(key).or_insert_with(|| {
                let old = self.entries.get(&key).map(|&(l, _)| l);
                (hash, old.into_iter().collect())
            });
            group.0 = hash;
            group.1.push(loc);
        }
        let mut displaced = HashSet::new();
        let grouped: HashSet<Location> = groups
            .values()
            .flat_map(|(_, m)| m.iter().copied())
            .collect();
        for &loc in &results.displaced {
            if !displaced.insert(loc) {
                return Err(format!("location {loc} displaced twice in one batch"));
            }
            if !grouped.contains(&loc) && !self.by_location.contains_key(&loc) {
                return Err(format!(
                    "displaced location {loc} was neither in the index nor inserted by the batch"
                ));
            }
        }
        // Entries of other keys dropped by cuckoo overflow leave the model.
        for &loc in &results.displaced {
            let key = self.by_location.get(&loc).copied();
            if let Some(key) = key {
                if !groups.contains_key(&key) {
                    self.remove_location(loc);
                }
            }
        }
        let mut replaced = 0;
        for (key, (hash, members)) in groups {
            replaced += members.len() - 1;
            let survivors: Vec<Location> = members
                .iter()
                .copied()
                .filter(|l| !displaced.contains(l))
                .collect();
            if survivors.len() > 1 {
                return Err(format!(
                    "pair {} sig {:#x}: locations {survivors:?} all stayed in the index; at most \
                     one entry per pair and signature",
                    key.0, key.1
                ));
            }
            if let Some((old, _)) = self.entries.remove(&key) {
                self.by_location.remove(&old);
            }
            if let Some(&loc) = survivors.first() {
                self.entries.insert(key, (loc, hash));
                self.by_location.insert(loc, key);
            }
        }
        // Each group of m members displaces m - 1 by replacement, except where an older member
        // was first dropped by overflow (then that drop counts as lossy instead).
        let least_lossy = results
            .displaced
            .len()
            .checked_sub(replaced)
            .ok_or_else(|| {
                format!(
                    "{} locations displaced, but {replaced} same-signature inserts must have \
                 displaced one each",
                    results.displaced.len()
                )
            })?;
        if results.lossy < least_lossy || results.lossy > results.displaced.len() {
            return Err(format!(
                "lossy = {}, but {} locations were displaced, {replaced} of them at most by \
                 replacement",
                results.lossy,
                results.displaced.len()
            ));
        }
        Ok(())
    }
}

/// A small, fast, seeded generator (splitmix64): the suite needs no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent / 100`.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// Where random keys come from.
#[derive(Clone, Copy, Debug)]
pub enum KeySpace {
    /// Any 64-bit hash.
    Random,
    /// Bucket hashes from `0..buckets` and low 32 bits from `0..sigs`: many keys share bucket
    /// pairs and signatures (and low bits 0 and 1 share the remapped signature 1).
    Crowded {
        /// Distinct bucket hashes.
        buckets: u32,
        /// Distinct low halves.
        sigs: u32,
    },
}

impl KeySpace {
    /// A key hash from this space.
    pub fn draw(&self, rng: &mut Rng) -> KeyHash {
        match *self {
            KeySpace::Random => KeyHash(rng.next_u64()),
            KeySpace::Crowded { buckets, sigs } => {
                let bucket = rng.below(buckets as usize) as u64;
                // Spread the bucket hashes over the whole 32 bits so the table's mask matters.
                let high = bucket.wrapping_mul(0x9e37_79b1) & 0xffff_ffff;
                KeyHash((high << 32) | rng.below(sigs as usize) as u64)
            }
        }
    }
}

/// How a random run draws its batches.
#[derive(Clone, Copy, Debug)]
pub struct RandomRun {
    /// Slots asked of the factory.
    pub slots: usize,
    /// Where keys come from.
    pub keys: KeySpace,
    /// Batches to run.
    pub batches: usize,
    /// Most operations of each kind per batch.
    pub max_ops: usize,
    /// Keep `max_in_flight` batches in flight (else one at a time, reusing freed locations).
    pub pipelined: bool,
    /// Seed of the generator.
    pub seed: u64,
}

/// Runs random batches through a backend and checks every result against the [`Model`]; every
/// 16 batches, searches every entry the model holds. Returns the total of lossy drops.
///
/// # Panics
/// On the first broken rule, naming the batch.
pub fn random_batches(make: MakeIndex<'_>, run: RandomRun) -> usize {
    let mut index = make(run.slots);
    let mut model = Model::new(index.slots());
    let mut rng = Rng::new(run.seed);
    let in_flight_max = if run.pipelined {
        index.max_in_flight().max(1)
    } else {
        1
    };
    let mut next_fresh: Location = 1;
    let mut free: Vec<Location> = Vec::new();
    let mut in_flight = 0;
    let mut lossy = 0;
    let mut completed = 0;
    for n in 0..run.batches {
        let batch = if n % 16 == 15 {
            IndexBatch {
                searches: model.entries().into_iter().map(|(h, _)| h).collect(),
                ..IndexBatch::default()
            }
        } else {
            let fresh = |free: &mut Vec<Location>, next: &mut Location, rng: &mut Rng| {
                if !run.pipelined && !free.is_empty() && rng.chance(50) {
                    free.swap_remove(rng.below(free.len()))
                } else {
                    *next += 1;
                    *next - 1
                }
            };
            random_batch(&model, &mut rng, run, |rng| {
                fresh(&mut free, &mut next_fresh, rng)
            })
        };
        let before: HashSet<Location> = if run.pipelined {
            HashSet::new()
        } else {
            model.by_location.keys().copied().collect()
        };
        index
            .submit(batch)
            .unwrap_or_else(|e| panic!("{}: batch {n}: submit failed: {e}", index.name()));
        in_flight += 1;
        if in_flight == in_flight_max || n + 1 == run.batches {
            while in_flight > 0 {
                let (batch, results) = index
                    .complete()
                    .unwrap_or_else(|e| panic!("{}: complete failed: {e}", index.name()))
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: {in_flight} batches in flight, none came back",
                            index.name()
                        )
                    });
                model.apply(&batch, &results).unwrap_or_else(|e| {
                    panic!(
                        "{}: batch {completed} (seed {:#x}, {:?}): {e}",
                        index.name(),
                        run.seed,
                        run.keys
                    )
                });
                lossy += results.lossy;
                completed += 1;
                in_flight -= 1;
                if !run.pipelined {
                    // Locations that left the index may be issued again.
                    let inserted = batch.inserts.iter().map(|&(_, l)| l);
                    for loc in before.iter().copied().chain(inserted) {
                        // Each location leaves the index once, so it is pushed once.
                        if !model.holds_location(loc) {
                            free.push(loc);
                        }
                    }
                }
                index.recycle(results);
            }
        }
    }
    assert!(
        index.complete().expect("complete").is_none(),
        "{}: a batch completed twice",
        index.name()
    );
    lossy
}

/// One random batch: searches of held and random keys, deletes of held entries (and misses),
/// inserts of keys unique within the batch.
fn random_batch(
    model: &Model,
    rng: &mut Rng,
    run: RandomRun,
    mut fresh: impl FnMut(&mut Rng) -> Location,
) -> IndexBatch {
    let held = model.entries();
    let mut batch = IndexBatch::default();
    let pick_held = |rng: &mut Rng| held.get(rng.below(held.len().max(1))).copied();
    for _ in 0..rng.below(run.max_ops + 1) {
        let hash = match pick_held(rng) {
            Some((hash, _)) if rng.chance(60) => hash,
            _ => run.keys.draw(rng),
        };
        batch.searches.push(hash);
    }
    for _ in 0..rng.below(run.max_ops / 2 + 1) {
        match pick_held(rng) {
            Some((hash, loc)) if rng.chance(80) => batch.deletes.push((hash, loc)),
            // A wrong location or an absent key: deletes nothing.
            Some((hash, loc)) if rng.chance(50) => batch.deletes.push((hash, loc ^ 0x8000_0000)),
            _ => batch.deletes.push((run.keys.draw(rng), 0x7fff_ffff)),
        }
    }
    let mut seen = HashSet::new();
    for _ in 0..rng.below(run.max_ops + 1) {
        let hash = match pick_held(rng) {
            Some((hash, _)) if rng.chance(30) => hash,
            _ => run.keys.draw(rng),
        };
        if seen.insert(hash) {
            batch.inserts.push((hash, fresh(rng)));
        }
    }
    batch
}

fn run_one(index: &mut dyn BatchIndex, batch: IndexBatch) -> IndexResults {
    let name = index.name();
    let (_, results) = super::run_batch(index, batch)
        .unwrap_or_else(|e| panic!("{name}: a valid batch failed: {e}"));
    results
}

fn inserts(entries: &[(KeyHash, Location)]) -> IndexBatch {
    IndexBatch {
        inserts: entries.to_vec(),
        ..IndexBatch::default()
    }
}

fn searches(keys: &[KeyHash]) -> IndexBatch {
    IndexBatch {
        searches: keys.to_vec(),
        ..IndexBatch::default()
    }
}

fn the_location(found: [Location; 2]) -> Location {
    match found {
        [0, l] | [l, 0] => l,
        _ => panic!("two locations {found:?} for one key"),
    }
}

/// A key hash whose bucket hash is `bucket` and whose low half is `sig`.
pub fn key(bucket: u32, sig: u32) -> KeyHash {
    KeyHash((u64::from(bucket) << 32) | u64::from(sig))
}

/// A search in a batch sees neither that batch's deletes nor its inserts.
pub fn searches_see_the_index_before_the_batch(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let (a, b) = (key(7, 0x1111), key(9, 0x2222));
    run_one(&mut *index, inserts(&[(a, 1)]));
    let results = run_one(
        &mut *index,
        IndexBatch {
            searches: vec![a, b],
            inserts: vec![(b, 2)],
            deletes: vec![(a, 1)],
        },
    );
    assert_eq!(
        the_location(results.found[0]),
        1,
        "a's delete was seen early"
    );
    assert_eq!(
        the_location(results.found[1]),
        0,
        "b's insert was seen early"
    );
    let results = run_one(&mut *index, searches(&[a, b]));
    assert_eq!(the_location(results.found[0]), 0, "a's delete was lost");
    assert_eq!(the_location(results.found[1]), 2, "b's insert was lost");
}

/// Deletes run before inserts: deleting and re-inserting a key in one batch leaves the new entry
/// and displaces nothing.
pub fn deletes_apply_before_inserts(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let a = key(3, 0x3333);
    run_one(&mut *index, inserts(&[(a, 10)]));
    let results = run_one(
        &mut *index,
        IndexBatch {
            inserts: vec![(a, 11)],
            deletes: vec![(a, 10)],
            ..IndexBatch::default()
        },
    );
    assert!(results.displaced.is_empty(), "{:?}", results.displaced);
    let results = run_one(&mut *index, searches(&[a]));
    assert_eq!(the_location(results.found[0]), 11);
}

/// A delete must match signature and location; anything else leaves the entry.
pub fn deletes_match_signature_and_location(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let a = key(5, 0x5555);
    run_one(&mut *index, inserts(&[(a, 20)]));
    let other_sig = key(5, 0x5556);
    run_one(
        &mut *index,
        IndexBatch {
            deletes: vec![(a, 21), (other_sig, 20)],
            ..IndexBatch::default()
        },
    );
    let results = run_one(&mut *index, searches(&[a]));
    assert_eq!(
        the_location(results.found[0]),
        20,
        "a mismatched delete removed the entry"
    );
    run_one(
        &mut *index,
        IndexBatch {
            deletes: vec![(a, 20)],
            ..IndexBatch::default()
        },
    );
    let results = run_one(&mut *index, searches(&[a]));
    assert_eq!(
        the_location(results.found[0]),
        0,
        "an exact delete left the entry"
    );
}

/// An insert replaces the entry with its signature in its pair, reached from either bucket, and
/// reports the old location.
pub fn inserts_replace_the_same_signature(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let shape = TableShape::for_slots(index.slots());
    let a = key(0x40, 0x0f0f_0003);
    run_one(&mut *index, inserts(&[(a, 30)]));
    // The same pair named from its other bucket.
    let [_, b2] = shape.candidates(a);
    let same_pair = key(b2, 0x0f0f_0003);
    assert_eq!(shape.pair(same_pair), shape.pair(a));
    let results = run_one(&mut *index, inserts(&[(same_pair, 31)]));
    assert_eq!(results.displaced, vec![30]);
    assert_eq!(results.lossy, 0);
    let results = run_one(&mut *index, searches(&[a, same_pair]));
    assert_eq!(the_location(results.found[0]), 31);
    assert_eq!(the_location(results.found[1]), 31);
}

/// Two inserts of one pair and signature in one batch leave one entry and displace the other.
pub fn one_entry_per_pair_and_signature(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let shape = TableShape::for_slots(index.slots());
    let a = key(0x77, 0x1234_5601);
    let [_, b2] = shape.candidates(a);
    let twin = key(b2, 0x1234_5601);
    let results = run_one(&mut *index, inserts(&[(a, 40), (twin, 41)]));
    assert_eq!(results.displaced.len(), 1, "{:?}", results.displaced);
    assert_eq!(results.lossy, 0);
    let survivor = if results.displaced == [40] { 41 } else { 40 };
    let results = run_one(&mut *index, searches(&[a, twin]));
    assert_eq!(the_location(results.found[0]), survivor);
    assert_eq!(the_location(results.found[1]), survivor);
}

/// Keys of one pair with distinct signatures all fit while the pair has room (two buckets of 8).
pub fn a_pair_holds_sixteen_signatures(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let shape = TableShape::for_slots(index.slots());
    // Signatures with the low block bit set have a second bucket distinct from the first.
    let keys: Vec<KeyHash> = (0..16u32).map(|i| key(0x20, 0x100 * i + 1)).collect();
    assert!(keys
        .iter()
        .all(|&k| shape.candidates(k)[0] != shape.candidates(k)[1]));
    let entries: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, 100 + i as u32))
        .collect();
    let results = run_one(&mut *index, inserts(&entries));
    assert!(results.displaced.is_empty(), "{:?}", results.displaced);
    let results = run_one(&mut *index, searches(&keys));
    for (i, found) in results.found.iter().enumerate() {
        assert_eq!(the_location(*found), 100 + i as u32, "key {i}");
    }
}

/// Location 0 is never issued: a batch holding it is rejected and has no effect.
pub fn location_zero_is_rejected(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let a = key(1, 0x4444);
    let b = key(2, 0x4445);
    let bad = IndexBatch {
        inserts: vec![(a, 1), (b, 0)],
        ..IndexBatch::default()
    };
    match index.submit(bad) {
        Err(IndexError::InvalidBatch(_)) => {}
        other => panic!("{}: location 0 gave {other:?}", index.name()),
    }
    assert!(index.complete().expect("complete").is_none());
    let results = run_one(&mut *index, searches(&[a]));
    assert_eq!(
        the_location(results.found[0]),
        0,
        "part of a rejected batch was applied"
    );
    let bad = IndexBatch {
        deletes: vec![(a, 0)],
        ..IndexBatch::default()
    };
    assert!(matches!(
        index.submit(bad),
        Err(IndexError::InvalidBatch(_))
    ));
}

/// At most `max_in_flight` batches in flight; they complete in order; an idle index completes
/// nothing; `clear` refuses while busy.
pub fn pipelining_keeps_submission_order(make: MakeIndex<'_>) {
    let mut index = make(1024);
    assert!(index.complete().expect("complete").is_none());
    let depth = index.max_in_flight();
    assert!(depth >= 1);
    let a = key(11, 0x6666);
    for n in 0..depth {
        let batch = IndexBatch {
            searches: vec![a],
            inserts: vec![(a, 50 + n as u32)],
            ..IndexBatch::default()
        };
        index.submit(batch).expect("submit within max_in_flight");
    }
    assert_eq!(
        index.submit(searches(&[a])),
        Err(IndexError::Busy),
        "{}: more than max_in_flight batches accepted",
        index.name()
    );
    assert_eq!(index.clear(), Err(IndexError::Busy));
    for n in 0..depth {
        let (batch, results) = index.complete().expect("complete").expect("in flight");
        assert_eq!(batch.inserts, vec![(a, 50 + n as u32)], "out of order");
        let want = if n == 0 { 0 } else { 50 + n as u32 - 1 };
        assert_eq!(the_location(results.found[0]), want);
    }
    assert!(index.complete().expect("complete").is_none());
}

/// `clear` empties the index.
pub fn clear_empties_the_index(make: MakeIndex<'_>) {
    let mut index = make(1024);
    let keys: Vec<KeyHash> = (0..100).map(|i| key(i * 7919, 0xabc0 + i)).collect();
    let entries: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, i as u32 + 1))
        .collect();
    run_one(&mut *index, inserts(&entries));
    index.clear().expect("clear");
    let results = run_one(&mut *index, searches(&keys));
    assert!(
        results.found.iter().all(|f| *f == [0, 0]),
        "clear left entries"
    );
}

/// Random keys into a table at half load never drop an entry; near full, drops are reported and
/// everything not reported is still found.
pub fn lossy_only_when_nearly_full(make: MakeIndex<'_>) {
    let mut index = make(1 << 14);
    let slots = index.slots();
    let mut model = Model::new(slots);
    let mut rng = Rng::new(0x1055);
    let mut next: Location = 1;
    let mut fill_to = |index: &mut dyn BatchIndex, model: &mut Model, target: usize| {
        let mut lossy = 0;
        while model.len() < target {
            let n = (target - model.len()).min(4096);
            let batch = inserts(
                &(0..n)
                    .map(|_| {
                        next += 1;
                        (KeyHash(rng.next_u64()), next)
                    })
                    .collect::<Vec<_>>(),
            );
            let results = run_one(index, batch.clone());
            model
                .apply(&batch, &results)
                .unwrap_or_else(|e| panic!("fill: {e}"));
            lossy += results.lossy;
            if results.lossy > n / 2 {
                break;
            }
        }
        lossy
    };
    assert_eq!(
        fill_to(&mut *index, &mut model, slots / 2),
        0,
        "drops at half load"
    );
    fill_to(&mut *index, &mut model, slots * 95 / 100);
    assert!(
        model.len() > slots * 85 / 100,
        "only {} of {slots} slots held",
        model.len()
    );
    let held = model.entries();
    let batch = searches(&held.iter().map(|&(h, _)| h).collect::<Vec<_>>());
    let results = run_one(&mut *index, batch.clone());
    model
        .apply(&batch, &results)
        .unwrap_or_else(|e| panic!("final search: {e}"));
}

/// Random batches in a 16-bucket table over a few bucket hashes and signatures: constant
/// collisions, full pairs, displacement chains and lossy drops.
pub fn random_batches_in_a_crowded_table(make: MakeIndex<'_>) {
    for seed in 0..4 {
        random_batches(
            &mut *make,
            RandomRun {
                slots: 1,
                keys: KeySpace::Crowded {
                    buckets: 12,
                    sigs: 20,
                },
                batches: 400,
                max_ops: 24,
                pipelined: false,
                seed: 0xc0ffee + seed,
            },
        );
    }
}

/// Random batches with random keys in a table that fills up and drains.
pub fn random_batches_in_a_larger_table(make: MakeIndex<'_>) {
    random_batches(
        make,
        RandomRun {
            slots: 1 << 12,
            keys: KeySpace::Random,
            batches: 300,
            max_ops: 400,
            pipelined: false,
            seed: 0xbeef,
        },
    );
}

/// Random batches kept `max_in_flight` deep.
pub fn random_batches_pipelined(make: MakeIndex<'_>) {
    random_batches(
        make,
        RandomRun {
            slots: 256,
            keys: KeySpace::Crowded {
                buckets: 64,
                sigs: 64,
            },
            batches: 300,
            max_ops: 64,
            pipelined: true,
            seed: 0xfeed,
        },
    );
}

/// Expands to a module of `#[test]`s, one per contract check, for the backend `make` builds:
/// `contract_tests!(name, |slots| -> Box<dyn BatchIndex> { ... })`.
#[macro_export]
macro_rules! contract_tests {
    ($name:ident, $make:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::index::contract as c;
            use $crate::index::BatchIndex;

            fn make(slots: usize) -> Box<dyn BatchIndex> {
                let f: &dyn Fn(usize) -> Box<dyn BatchIndex> = &$make;
                f(slots)
            }

            $crate::contract_tests!(@tests
                searches_see_the_index_before_the_batch,
                deletes_apply_before_inserts,
                deletes_match_signature_and_location,
                inserts_replace_the_same_signature,
                one_entry_per_pair_and_signature,
                a_pair_holds_sixteen_signatures,
                location_zero_is_rejected,
                pipelining_keeps_submission_order,
                clear_empties_the_index,
                lossy_only_when_nearly_full,
                random_batches_in_a_crowded_table,
                random_batches_in_a_larger_table,
                random_batches_pipelined
            );
        }
    };
    (@tests $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                c::$check(&mut make);
            }
        )*
    };
}
