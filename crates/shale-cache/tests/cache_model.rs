//! The cache against a `HashMap` model: random rounds of every op, executed through the
//! scheduler and the CPU index, must answer exactly as the ops run one at a time in order.

use std::collections::HashMap;

use shale_cache::index::contract::Rng;
use shale_cache::{Cache, CacheConfig, IncrStyle, OpId, Outcome, SetMode, Worker, KEEP_EXPIRY};

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    value: Vec<u8>,
    flags: u32,
    expired: bool,
    cas: Option<u64>,
}

#[derive(Debug)]
enum Step {
    Get(Vec<u8>),
    Set(Vec<u8>, Vec<u8>, u32, SetMode, bool),
    Delete(Vec<u8>),
    Touch(Vec<u8>, bool),
    Incr(Vec<u8>, u64, bool, IncrStyle),
    /// memcached's incr of an item of this CAS version (meta `ma ... C`).
    IncrIf(Vec<u8>, u64, bool, u64),
    /// Meta delete: CAS version (0: any), invalidate, expire (`Some(true)`: at once).
    MetaDelete(Vec<u8>, u64, bool, Option<bool>),
    Flush,
}

fn key(rng: &mut Rng, keys: usize) -> Vec<u8> {
    format!("key:{}", rng.below(keys)).into_bytes()
}

fn value(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        0 if rng.chance(20) => format!(" {} ", rng.below(1000)).into_bytes(),
        0 => rng.below(1000).to_string().into_bytes(),
        1 => format!("-{}", rng.below(1000)).into_bytes(),
        2 => b"18446744073709551610".to_vec(),
        _ => (0..rng.below(300)).map(|i| b'a' + (i % 26) as u8).collect(),
    }
}

fn step(rng: &mut Rng, model: &HashMap<Vec<u8>, Entry>, keys: usize) -> Step {
    let k = key(rng, keys);
    match rng.below(100) {
        0..=34 => Step::Get(k),
        35..=54 => Step::Set(
            k,
            value(rng),
            rng.below(5) as u32,
            SetMode::Always,
            rng.chance(3),
        ),
        55..=59 => Step::Set(k, value(rng), 1, SetMode::Add, false),
        60..=64 => Step::Set(k, value(rng), 2, SetMode::Replace, false),
        65..=69 => {
            let cas = match model.get(&k).and_then(|e| e.cas) {
                Some(cas) if rng.chance(70) => cas,
                _ => 0,
            };
            Step::Set(k, value(rng), 3, SetMode::Cas(cas), false)
        }
        70..=71 => Step::Set(k, value(rng), 0, SetMode::Append, false),
        72..=73 => Step::Set(k, value(rng), 0, SetMode::Prepend, false),
        74..=75 => {
            // A known version, an older one (stale), or one never issued.
            let known = model.get(&k).and_then(|e| e.cas);
            let cas = match rng.below(3) {
                0 => known.unwrap_or(0),
                1 => known.map_or(0, |c| c - 1),
                _ => u64::MAX,
            };
            let mode = match rng.below(3) {
                0 => SetMode::CasOrStale(cas),
                n => SetMode::CasAppend {
                    cas,
                    prepend: n == 2,
                },
            };
            Step::Set(k, value(rng), 4, mode, false)
        }
        76..=80 => Step::Delete(k),
        81..=83 => {
            let cas = match model.get(&k).and_then(|e| e.cas) {
                Some(cas) if rng.chance(50) => cas,
                _ if rng.chance(50) => 0,
                _ => u64::MAX,
            };
            let expire = match rng.below(3) {
                0 => None,
                n => Some(n == 1),
            };
            Step::MetaDelete(k, cas, rng.chance(50), expire)
        }
        84..=86 => Step::Touch(k, rng.chance(30)),
        87..=89 => {
            let cas = match model.get(&k).and_then(|e| e.cas) {
                Some(cas) if rng.chance(70) => cas,
                _ => u64::MAX,
            };
            Step::IncrIf(k, rng.below(100) as u64, rng.chance(40), cas)
        }
        90..=98 => Step::Incr(
            k,
            rng.below(100) as u64,
            rng.chance(40),
            if rng.chance(50) {
                IncrStyle::Redis
            } else {
                IncrStyle::Memcached
            },
        ),
        _ => Step::Flush,
    }
}

const FAR_FUTURE: u64 = 1 << 50;

fn queue(worker: &mut Worker<'_>, step: &Step) -> Option<OpId> {
    match step {
        Step::Get(k) => Some(worker.get(k)),
        Step::Set(k, v, flags, mode, expired) => {
            let expire = if *expired { 1 } else { 0 };
            worker.set(k, &[v], *flags, expire, *mode).ok()
        }
        Step::Delete(k) => Some(worker.delete(k)),
        Step::Touch(k, expire) => Some(worker.touch(k, if *expire { 1 } else { FAR_FUTURE })),
        Step::Incr(k, d, decr, style) => Some(worker.incr(k, *d, *decr, *style)),
        Step::IncrIf(k, d, decr, cas) => {
            Some(worker.incr_if(k, *d, *decr, IncrStyle::Memcached, *cas))
        }
        Step::MetaDelete(k, cas, invalidate, expire) => {
            let expire = match expire {
                None => KEEP_EXPIRY,
                Some(true) => 1,
                Some(false) => FAR_FUTURE,
            };
            Some(worker.meta_delete(k, *cas, *invalidate, expire))
        }
        Step::Flush => Some(worker.flush()),
    }
}

fn live<'m>(model: &'m mut HashMap<Vec<u8>, Entry>, k: &[u8]) -> Option<&'m mut Entry> {
    model.get_mut(k).filter(|e| !e.expired)
}

/// Applies `step` to the model and checks the cache's answer.
fn check(
    worker: &mut Worker<'_>,
    model: &mut HashMap<Vec<u8>, Entry>,
    step: &Step,
    id: OpId,
    at: &str,
) {
    let outcome = worker.outcome(id);
    match step {
        Step::Get(k) => {
            let got = worker
                .read(id)
                .map(|i| (i.value().to_vec(), i.flags(), i.cas()));
            let want = live(model, k);
            match (&got, want) {
                (None, None) => {}
                (Some((v, f, cas)), Some(e)) if *v == e.value && *f == e.flags => {
                    e.cas = Some(*cas);
                }
                (got, want) => panic!("{at}: GET {k:?}: got {got:?}, want {want:?}"),
            }
        }
        Step::Set(k, v, flags, mode, expired) => {
            let new = Entry {
                value: v.clone(),
                flags: *flags,
                expired: *expired,
                cas: None,
            };
            let want = match (mode, live(model, k)) {
                (SetMode::Always, _) | (SetMode::Add, None) | (SetMode::Replace, Some(_)) => {
                    model.insert(k.clone(), new);
                    Outcome::Stored
                }
                (SetMode::Add, Some(_)) | (SetMode::Replace, None) => Outcome::NotStored,
                (SetMode::Cas(_), None) => Outcome::NotFound,
                (SetMode::Cas(c), Some(e)) => {
                    if e.cas == Some(*c) {
                        model.insert(k.clone(), new);
                        Outcome::Stored
                    } else {
                        Outcome::Exists
                    }
                }
                (SetMode::CasOrStale(_), None) => Outcome::NotFound,
                (SetMode::CasOrStale(c), Some(e)) => {
                    // A version unknown to the model was issued: above 0, below u64::MAX;
                    // against another one the model cannot tell (versions come in blocks per
                    // thread, so not in order), and follows the cache.
                    let newer_or_same = match e.cas {
                        None if *c == 0 => true,
                        None if *c == u64::MAX => false,
                        None => outcome == Outcome::Stored,
                        Some(cas) => *c <= cas,
                    };
                    if newer_or_same {
                        model.insert(k.clone(), new);
                        Outcome::Stored
                    } else {
                        Outcome::Exists
                    }
                }
                (SetMode::CasAppend { .. }, None) => Outcome::NotStored,
                (SetMode::CasAppend { cas, prepend }, Some(e)) => {
                    if e.cas != Some(*cas) {
                        Outcome::Exists
                    } else {
                        if *prepend {
                            e.value.splice(0..0, v.iter().copied());
                        } else {
                            e.value.extend_from_slice(v);
                        }
                        e.cas = None;
                        Outcome::Stored
                    }
                }
                (SetMode::Append | SetMode::Prepend, None) => Outcome::NotStored,
                (SetMode::Append, Some(e)) => {
                    e.value.extend_from_slice(v);
                    e.cas = None;
                    Outcome::Stored
                }
                (SetMode::Prepend, Some(e)) => {
                    e.value.splice(0..0, v.iter().copied());
                    e.cas = None;
                    Outcome::Stored
                }
            };
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::Delete(k) => {
            let want = if live(model, k).is_some() {
                model.remove(k);
                Outcome::Deleted
            } else {
                Outcome::NotFound
            };
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::Touch(k, expire) => {
            let want = match live(model, k) {
                Some(e) => {
                    e.expired = *expire;
                    Outcome::Touched
                }
                None => Outcome::NotFound,
            };
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::Incr(k, delta, decr, style) => {
            let want = incr_model(model, k, *delta, *decr, *style);
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::IncrIf(k, delta, decr, cas) => {
            let want = match live(model, k) {
                Some(e) if e.cas != Some(*cas) => Outcome::Exists,
                _ => incr_model(model, k, *delta, *decr, IncrStyle::Memcached),
            };
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::MetaDelete(k, cas, invalidate, expire) => {
            let want = match live(model, k) {
                None => Outcome::NotFound,
                Some(e) if *cas != 0 && e.cas != Some(*cas) => Outcome::Exists,
                Some(e) if *invalidate => {
                    // Kept under a new version.
                    e.cas = None;
                    if let Some(expire) = expire {
                        e.expired = *expire;
                    }
                    Outcome::Deleted
                }
                Some(_) => {
                    model.remove(k);
                    Outcome::Deleted
                }
            };
            assert_eq!(outcome, want, "{at}: {step:?}");
        }
        Step::Flush => {
            model.clear();
            assert_eq!(outcome, Outcome::Flushed, "{at}");
        }
    }
}

fn incr_model(
    model: &mut HashMap<Vec<u8>, Entry>,
    k: &[u8],
    delta: u64,
    decr: bool,
    style: IncrStyle,
) -> Outcome {
    let current = live(model, k).cloned();
    let digits = |v: &[u8]| {
        let v = v.trim_ascii();
        !v.is_empty() && v.len() <= 20 && v.iter().all(u8::is_ascii_digit)
    };
    let (outcome, text) = match style {
        IncrStyle::Memcached => {
            let Some(e) = &current else {
                return Outcome::NotFound;
            };
            if !digits(&e.value) {
                return Outcome::NotANumber;
            }
            let Ok(old) = std::str::from_utf8(e.value.trim_ascii())
                .unwrap()
                .parse::<u64>()
            else {
                return Outcome::NotANumber;
            };
            let new = if decr {
                old.saturating_sub(delta)
            } else {
                old.wrapping_add(delta)
            };
            (Outcome::Unsigned(new), new.to_string())
        }
        IncrStyle::Redis => {
            let old = match &current {
                None => 0i64,
                Some(e) => {
                    let text = std::str::from_utf8(&e.value).unwrap_or("x");
                    match text.parse::<i64>() {
                        Ok(n) if n.to_string() == text => n,
                        _ => return Outcome::NotANumber,
                    }
                }
            };
            let new = if decr {
                old.checked_sub(delta as i64)
            } else {
                old.checked_add(delta as i64)
            };
            let Some(new) = new else {
                return Outcome::Overflow;
            };
            (Outcome::Signed(new), new.to_string())
        }
    };
    let flags = current.as_ref().map_or(0, |e| e.flags);
    model.insert(
        k.to_vec(),
        Entry {
            value: text.into_bytes(),
            flags,
            expired: false,
            cas: None,
        },
    );
    outcome
}

fn run_model(seed: u64, rounds: usize, keys: usize, max_ops: usize) {
    let cache = Cache::with_cpu_index(&CacheConfig::new(64 << 20, 1)).unwrap();
    let mut worker = cache.worker(0);
    let mut model: HashMap<Vec<u8>, Entry> = HashMap::new();
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        worker.begin();
        let steps: Vec<Step> = (0..1 + rng.below(max_ops))
            .map(|_| step(&mut rng, &model, keys))
            .collect();
        let ids: Vec<Option<OpId>> = steps.iter().map(|s| queue(&mut worker, s)).collect();
        worker.execute();
        for (i, (s, id)) in steps.iter().zip(ids).enumerate() {
            let id = id.unwrap_or_else(|| panic!("round {round}: {s:?} refused"));
            check(
                &mut worker,
                &mut model,
                s,
                id,
                &format!("seed {seed} round {round} op {i}"),
            );
        }
        worker.end();
    }
}

#[test]
fn one_op_per_round_matches_the_model() {
    run_model(1, 3000, 20, 1);
}

#[test]
fn many_ops_per_round_on_few_keys_match_the_model() {
    for seed in 0..6 {
        run_model(100 + seed, 400, 8, 40);
    }
}

/// A longer soak: `cargo test --release -p shale-cache --test cache_model -- --ignored`.
#[test]
#[ignore]
fn soak_many_seeds() {
    for seed in 1000..1300 {
        run_model(
            seed,
            300,
            2 + (seed as usize % 30),
            1 + (seed as usize % 80),
        );
    }
}

#[test]
fn many_ops_per_round_on_many_keys_match_the_model() {
    run_model(7, 300, 500, 200);
}

/// With memory for a fraction of the keys, reads may miss but never see a stale or wrong value.
#[test]
fn evictions_lose_items_but_never_return_a_wrong_value() {
    let mut config = CacheConfig::new(16 << 20, 1);
    config.index_slots = Some(1 << 15);
    let cache = Cache::with_cpu_index(&config).unwrap();
    let mut worker = cache.worker(0);
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut rng = Rng::new(99);
    let mut hits = 0;
    let mut retries = 0;
    for round in 0..3000 {
        worker.begin();
        let mut steps = Vec::new();
        for _ in 0..1 + rng.below(128) {
            let k = format!("k{}", rng.below(400_000)).into_bytes();
            let step = if rng.chance(50) {
                let v = format!(
                    "{}:{}:{}",
                    String::from_utf8_lossy(&k),
                    round,
                    rng.below(1000)
                );
                let v = v.into_bytes().repeat(1 + rng.below(8));
                match worker.set(&k, &[&v], 0, 0, SetMode::Always) {
                    Ok(id) => (k, Some(v), Some(id)),
                    Err(shale_cache::StoreError::Retry) => {
                        retries += 1;
                        continue;
                    }
                    Err(e) => panic!("round {round}: {e:?}"),
                }
            } else if rng.chance(10) {
                let id = worker.delete(&k);
                (k, None, Some(id))
            } else {
                let id = worker.get(&k);
                (k, None, Some(id))
            };
            steps.push(step);
        }
        worker.execute();
        for (k, v, id) in steps {
            let id = id.unwrap();
            match (v, worker.outcome(id)) {
                (Some(v), Outcome::Stored) => {
                    model.insert(k, v);
                }
                (None, Outcome::Deleted | Outcome::NotFound) => {
                    model.remove(&k);
                }
                (None, _) => {
                    if let Some(item) = worker.read(id) {
                        hits += 1;
                        assert_eq!(
                            Some(item.value()),
                            model.get(&k).map(|v| &v[..]),
                            "round {round}"
                        );
                    }
                }
                (v, o) => panic!("round {round}: {v:?} {o:?}"),
            }
        }
        worker.end();
    }
    let stats = cache.stats();
    let evicted = shale_cache::stats::Stats::get(&stats.evictions)
        + shale_cache::stats::Stats::get(&stats.index_lossy);
    assert!(evicted > 1000, "only {evicted} evictions");
    assert!(hits > 100, "only {hits} hits");
    assert!(retries < 2000, "{retries} retries");
}
