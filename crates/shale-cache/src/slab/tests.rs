use super::*;
use crate::item::ItemMeta;

fn meta(cas: u64) -> ItemMeta {
    ItemMeta {
        cas,
        expire_ms: 0,
        flags: 7,
        ..ItemMeta::default()
    }
}

#[test]
fn stored_items_read_back() {
    let slabs = Slabs::new(4 * PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    let a = slabs.store(b"key", &[b"val", b"ue"], meta(1)).unwrap();
    let b = slabs.store(b"k2", &[&[9u8; 5000]], meta(2)).unwrap();
    assert_ne!(a, 0);
    assert_ne!(slabs.class_of(a), slabs.class_of(b));
    slabs.epochs().pin(0);
    // SAFETY: pinned, and the slots hold the items just written.
    let (ia, ib) = unsafe { (slabs.item(a).unwrap(), slabs.item(b).unwrap()) };
    assert_eq!(
        (ia.key(), ia.value(), ia.flags(), ia.cas()),
        (&b"key"[..], &b"value"[..], 7, 1)
    );
    assert_eq!(ib.value(), &[9u8; 5000][..]);
    assert_eq!(slabs.alloc(PAGE_SIZE + 1), Err(AllocError::TooLarge));
}

#[test]
fn a_freed_slot_waits_for_pinned_readers() {
    let slabs = Slabs::new(PAGE_SIZE, DEFAULT_GROWTH, 2).unwrap();
    let per_page = PAGE_SIZE / MIN_SLOT;
    let all: Vec<Location> = (0..per_page)
        .map(|_| slabs.alloc(MIN_SLOT).unwrap())
        .collect();
    assert_eq!(slabs.alloc(MIN_SLOT), Err(AllocError::Full));
    slabs.epochs().pin(1);
    slabs.free(all[5]);
    slabs.epochs().advance();
    assert_eq!(
        slabs.alloc(MIN_SLOT),
        Err(AllocError::Full),
        "reused under a pinned reader"
    );
    slabs.epochs().pin(1);
    assert_eq!(slabs.alloc(MIN_SLOT), Ok(all[5]));
}

#[test]
fn clock_takes_unreferenced_live_slots_first() {
    let slabs = Slabs::new(PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    let per_page = PAGE_SIZE / MIN_SLOT;
    let all: Vec<Location> = (0..per_page)
        .map(|_| slabs.alloc(MIN_SLOT).unwrap())
        .collect();
    for &loc in &all {
        slabs.set_live(loc);
    }
    assert_eq!(slabs.live_items(), per_page);
    // Every even slot was read.
    for &loc in all.iter().step_by(2) {
        slabs.reference(loc);
    }
    let mut victims = Vec::new();
    assert!(slabs.sweep(0, &mut victims));
    assert!(!victims.is_empty());
    assert!(victims.len() <= EVICT_BATCH);
    let odd: std::collections::HashSet<_> = all.iter().skip(1).step_by(2).collect();
    assert!(
        victims.iter().all(|v| odd.contains(v)),
        "a referenced slot was picked"
    );
    // Enough victims outstanding: no second sweep.
    let mut more = Vec::new();
    slabs.sweep(0, &mut more);
    assert!(more.is_empty());
    for &v in &victims {
        assert!(slabs.clear_live(v));
        slabs.free(v);
        slabs.victim_settled(v);
    }
    slabs.epochs().advance();
    assert!(victims.contains(&slabs.alloc(MIN_SLOT).unwrap()));
}

#[test]
fn items_read_often_outlast_items_read_once() {
    let slabs = Slabs::new(PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    let per_page = PAGE_SIZE / MIN_SLOT;
    let all: Vec<Location> = (0..per_page)
        .map(|_| slabs.alloc(MIN_SLOT).unwrap())
        .collect();
    for (i, &loc) in all.iter().enumerate() {
        slabs.set_live(loc);
        // Every fourth item is read three times, the others once.
        let reads = if i % 4 == 0 { 3 } else { 1 };
        for _ in 0..reads {
            slabs.reference(loc);
        }
    }
    let hot: std::collections::HashSet<_> = all.iter().step_by(4).collect();
    // Sweep until half the items are gone: none of the hot ones may be among them.
    let mut gone = 0;
    while gone < per_page / 2 {
        let mut victims = Vec::new();
        assert!(slabs.sweep(0, &mut victims));
        assert!(!victims.is_empty());
        for v in victims {
            assert!(!hot.contains(&v), "a hot item went before the cold ones");
            assert!(slabs.clear_live(v));
            slabs.free(v);
            slabs.victim_settled(v);
            gone += 1;
        }
        slabs.epochs().advance();
        // Keep the free lists from answering: take back what was freed.
        while slabs.alloc(MIN_SLOT).is_ok() {}
    }
}

#[test]
fn clock_clears_reference_bits_then_evicts() {
    let slabs = Slabs::new(PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    let per_page = PAGE_SIZE / MIN_SLOT;
    let all: Vec<Location> = (0..per_page)
        .map(|_| slabs.alloc(MIN_SLOT).unwrap())
        .collect();
    for &loc in &all {
        slabs.set_live(loc);
        slabs.reference(loc);
    }
    let mut victims = Vec::new();
    slabs.sweep(0, &mut victims);
    assert!(
        !victims.is_empty(),
        "a second turn evicts once the bits are cleared"
    );
}

#[test]
fn evict_all_frees_live_slots_only() {
    let slabs = Slabs::new(2 * PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    let a = slabs.alloc(MIN_SLOT).unwrap();
    let unpublished = slabs.alloc(MIN_SLOT).unwrap();
    slabs.set_live(a);
    let big = slabs.alloc(PAGE_SIZE).unwrap();
    slabs.set_live(big);
    assert_eq!(slabs.alloc(PAGE_SIZE), Err(AllocError::Full));
    assert_eq!(slabs.evict_all(), 2);
    assert_eq!(slabs.live_items(), 0);
    assert!(!slabs.is_live(a));
    slabs.epochs().advance();
    assert_eq!(slabs.alloc(PAGE_SIZE), Ok(big));
    let again = slabs.alloc(MIN_SLOT).unwrap();
    assert_ne!(again, unpublished, "an unpublished slot was freed");
}

#[test]
fn locations_outside_the_arena_are_refused() {
    let slabs = Slabs::new(PAGE_SIZE, DEFAULT_GROWTH, 1).unwrap();
    assert!(slabs.slot(0).is_none());
    assert!(slabs.slot(u32::MAX).is_none());
    assert!(slabs.slot(join(0, 0)).is_none(), "an unassigned page");
    let a = slabs.alloc(MIN_SLOT).unwrap();
    assert!(slabs.slot(a).is_some());
    assert!(
        slabs.slot(join(0, PAGE_SIZE / MIN_SLOT)).is_none(),
        "past the page's slots"
    );
}
