//! Several threads through one scheduler: each thread's own keys behave exactly as its model
//! says (passes that combine threads keep every list in order), and shared keys only ever return
//! a value some thread wrote for that key.

use std::collections::HashMap;

use shale_cache::index::contract::Rng;
use shale_cache::{Cache, CacheConfig, Outcome, SetMode};

#[test]
fn threads_sharing_passes_keep_their_own_order() {
    const THREADS: usize = 4;
    let cache = Cache::with_cpu_index(&CacheConfig::new(64 << 20, THREADS)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let cache = &cache;
            scope.spawn(move || {
                let mut worker = cache.worker(t);
                let mut rng = Rng::new(t as u64 + 7);
                let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
                for round in 0..3000 {
                    worker.begin();
                    let mut steps = Vec::new();
                    for _ in 0..1 + rng.below(20) {
                        let shared = rng.chance(30);
                        let k = if shared {
                            format!("shared:{}", rng.below(10))
                        } else {
                            format!("t{t}:{}", rng.below(10))
                        }
                        .into_bytes();
                        let r = rng.below(10);
                        let step = if r < 4 {
                            let v = format!(
                                "{}={round}.{}",
                                String::from_utf8_lossy(&k),
                                rng.below(99)
                            );
                            let id = worker
                                .set(&k, &[v.as_bytes()], 0, 0, SetMode::Always)
                                .unwrap();
                            (k, Some(v.into_bytes()), id, shared)
                        } else if r < 5 {
                            (k.clone(), None, worker.delete(&k), shared)
                        } else {
                            (k.clone(), None, worker.get(&k), shared)
                        };
                        steps.push(step);
                    }
                    worker.execute();
                    for (k, v, id, shared) in steps {
                        match (v, worker.outcome(id)) {
                            (Some(v), Outcome::Stored) => {
                                model.insert(k, v);
                            }
                            (None, o @ (Outcome::Deleted | Outcome::NotFound)) => {
                                let had = model.remove(&k).is_some();
                                if !shared {
                                    assert_eq!(
                                        had,
                                        o == Outcome::Deleted,
                                        "thread {t} round {round}"
                                    );
                                }
                            }
                            (None, _) => {
                                let got = worker.read(id).map(|i| i.value().to_vec());
                                if shared {
                                    if let Some(got) = got {
                                        let prefix = [&k[..], b"="].concat();
                                        assert!(got.starts_with(&prefix), "{got:?} under {k:?}");
                                    }
                                } else {
                                    assert_eq!(
                                        got.as_ref(),
                                        model.get(&k),
                                        "thread {t} round {round}"
                                    );
                                }
                            }
                            (v, o) => panic!("{v:?} {o:?}"),
                        }
                    }
                    worker.end();
                }
            });
        }
    });
    let passes = shale_cache::stats::Stats::get(&cache.stats().passes);
    assert!(passes > 0);
}
