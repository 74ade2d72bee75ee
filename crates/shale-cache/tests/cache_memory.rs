//! Memory moves to where items go: after small items have filled every page, large items still
//! find room (pages move between size classes), and the small ones give way by eviction.

use shale_cache::{Cache, CacheConfig, Outcome, SetMode, StoreError};

#[test]
fn pages_move_to_a_class_that_has_none() {
    let mut config = CacheConfig::new(6 << 20, 1);
    config.index_slots = Some(1 << 16);
    let cache = Cache::with_cpu_index(&config).unwrap();
    let mut worker = cache.worker(0);
    // Small items until well past what fits: every page belongs to the small class.
    for round in 0..400 {
        worker.begin();
        for i in 0..400 {
            let key = format!("small:{round}:{i}");
            match worker.set(key.as_bytes(), &[b"0123456789"], 0, 0, SetMode::Always) {
                Ok(_) | Err(StoreError::Retry) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        worker.execute();
        worker.end();
    }
    let small_pages = cache.slabs().stats().classes[0].pages;
    assert!(small_pages >= 4, "{:?}", cache.slabs().stats());
    // Now 100 KB values: their class has no page and the arena is used up.
    let big = vec![b'x'; 100_000];
    let mut stored = 0;
    let mut refused = 0;
    let mut last = String::new();
    for round in 0..200 {
        worker.begin();
        let key = format!("big:{round}");
        let id = match worker.set(key.as_bytes(), &[&big], 0, 0, SetMode::Always) {
            Ok(id) => Some(id),
            Err(StoreError::Retry) => None,
            Err(e) => panic!("round {round}: {e:?}"),
        };
        worker.execute();
        if let Some(id) = id {
            assert_eq!(worker.outcome(id), Outcome::Stored);
            stored += 1;
            last = key;
        } else {
            refused += 1;
        }
        worker.end();
    }
    let stats = cache.slabs().stats();
    assert!(stats.pages_moved >= 1, "{stats:?}");
    assert!(
        stored >= 150,
        "only {stored} large items stored ({refused} retries): {stats:?}"
    );
    // The last large item stored reads back.
    worker.begin();
    let id = worker.get(last.as_bytes());
    worker.execute();
    assert_eq!(worker.read(id).map(|i| i.value().len()), Some(100_000));
    worker.end();
}
