use super::*;
use crate::rng::Rng;
use std::sync::Arc;

#[test]
fn fnv_hash_matches_ycsb_values() {
    // Computed independently from the FNV-1 definition YCSB uses.
    assert_eq!(fnv_hash64(0), 12_161_962_213_042_174_405);
    assert_eq!(fnv_hash64(1), 9_929_646_806_074_584_996);
    assert_eq!(fnv_hash64(12345), 16_653_943_660_658_674_764);
}

#[test]
fn zipfian_gives_item_zero_its_theoretical_share() {
    // P(0) = 1/zeta(1000) = 0.1294, P(1) = 2^-0.99/zeta = 0.0651 for theta = 0.99.
    let z = Zipfian::new(0, 999, ZIPFIAN_CONSTANT);
    let mut rng = Rng::new(7);
    let n = 200_000;
    let mut counts = vec![0u32; 1000];
    for _ in 0..n {
        let v = z.next(&mut rng);
        assert!(v < 1000);
        counts[v as usize] += 1;
    }
    let p0 = f64::from(counts[0]) / f64::from(n);
    let p1 = f64::from(counts[1]) / f64::from(n);
    assert!((p0 - 0.1294).abs() < 0.01, "p0 = {p0}");
    assert!((p1 - 0.0651).abs() < 0.01, "p1 = {p1}");
    // Skew: the first 10% of items take well over half of the draws.
    let head: u32 = counts[..100].iter().sum();
    assert!(f64::from(head) / f64::from(n) > 0.6);
}

#[test]
fn scrambled_zipfian_spreads_hot_keys_but_keeps_the_skew() {
    let z = ScrambledZipfian::new(0, 9_999);
    let mut rng = Rng::new(11);
    let n = 200_000u32;
    let mut counts = vec![0u32; 10_000];
    for _ in 0..n {
        counts[z.next(&mut rng) as usize] += 1;
    }
    let mut sorted = counts.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let top1pct: u32 = sorted[..100].iter().sum();
    // zeta(100) / zeta(10^10) = 5.19 / 26.47: the 100 most popular ranks draw about 20%
    // (a uniform choice would give them 1%).
    let share = f64::from(top1pct) / f64::from(n);
    assert!((0.17..0.25).contains(&share), "top 1% share {share}");
    // The hottest key is not key 0 and hot keys are not clustered at the start.
    let hottest = counts
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .unwrap()
        .0;
    assert_ne!(hottest, 0);
    let first_100: u32 = counts[..100].iter().sum();
    assert!(f64::from(first_100) / f64::from(n) < 0.1);
}

#[test]
fn latest_favours_the_newest_records() {
    let mut latest = Latest::new(10_000);
    let mut rng = Rng::new(3);
    let n = 100_000;
    let mut newest_1pct = 0;
    for _ in 0..n {
        let v = latest.next(&mut rng, 10_000);
        assert!(v < 10_000);
        if v >= 9_900 {
            newest_1pct += 1;
        }
    }
    assert!(f64::from(newest_1pct) / f64::from(n) > 0.4, "{newest_1pct}");
    // After inserts it follows the new head.
    let v: Vec<u64> = (0..1000).map(|_| latest.next(&mut rng, 20_000)).collect();
    assert!(v.iter().filter(|&&x| x >= 19_900).count() > 400);
    assert!(v.iter().all(|&x| x < 20_000));
}

#[test]
fn hotspot_sends_the_hot_fraction_of_operations_to_the_hot_set() {
    let h = Hotspot::new(0, 9_999, 0.2, 0.8);
    let mut rng = Rng::new(5);
    let n = 100_000;
    let hot = (0..n).filter(|_| h.next(&mut rng) < 2_000).count();
    let share = hot as f64 / f64::from(n);
    assert!((share - 0.8).abs() < 0.01, "{share}");
}

#[test]
fn uniform_and_discrete_follow_their_weights() {
    let u = Uniform::new(10, 19);
    let mut rng = Rng::new(9);
    assert!((0..1000)
        .map(|_| u.next(&mut rng))
        .all(|v| (10..=19).contains(&v)));
    let mut d = Discrete::new();
    d.add('r', 0.5);
    d.add('u', 0.5);
    d.add('x', 0.0);
    let n = 100_000;
    let reads = (0..n).filter(|_| d.next(&mut rng) == 'r').count();
    assert!((reads as f64 / f64::from(n) - 0.5).abs() < 0.01);
}

#[test]
fn generators_are_deterministic_for_a_seed() {
    let z = ScrambledZipfian::new(0, 1_000_000);
    let a: Vec<u64> = {
        let mut r = Rng::new(99);
        (0..100).map(|_| z.next(&mut r)).collect()
    };
    let b: Vec<u64> = {
        let mut r = Rng::new(99);
        (0..100).map(|_| z.next(&mut r)).collect()
    };
    assert_eq!(a, b);
}

#[test]
fn acknowledged_counter_advances_only_over_contiguous_acks() {
    let c = AcknowledgedCounter::new(10);
    assert_eq!(c.acknowledged(), 10);
    let (a, b, d) = (c.next(), c.next(), c.next());
    assert_eq!((a, b, d), (10, 11, 12));
    c.acknowledge(b);
    assert_eq!(c.acknowledged(), 10, "11 is done but 10 is not");
    c.acknowledge(a);
    assert_eq!(c.acknowledged(), 12);
    c.acknowledge(d);
    assert_eq!(c.acknowledged(), 13);
}

#[test]
fn acknowledged_counter_is_consistent_under_concurrent_inserts() {
    let c = Arc::new(AcknowledgedCounter::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let c = Arc::clone(&c);
            s.spawn(move || {
                for _ in 0..10_000 {
                    let v = c.next();
                    c.acknowledge(v);
                }
            });
        }
    });
    assert_eq!(c.acknowledged(), 40_000);
}
