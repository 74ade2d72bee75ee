//! The leader's read lease: reads inside it need no heartbeat round, and a leader cut off from
//! the others stops serving reads before another leader can take a write (the linearizability
//! test also runs with leases on).

mod common;

use common::{put, Cluster};
use shale_repl::{NodeId, Replica};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_inside_the_lease_need_no_heartbeat_round() {
    let mut c = Cluster::new(11, 64 << 10);
    c.bootstrap(&[1, 2, 3]).await;
    let leader = c
        .wait_leader(Duration::from_secs(10))
        .await
        .expect("a leader");
    let r = c.replica(leader);
    r.read_barrier().await.expect("first barrier");
    let before = r.barrier_rounds();
    for _ in 0..1000 {
        r.read_barrier().await.expect("barrier");
    }
    let rounds = r.barrier_rounds() - before;
    assert!(
        rounds < 50,
        "1000 reads took {rounds} heartbeat rounds inside the lease"
    );
    // A follower has no lease.
    let follower = [1, 2, 3]
        .into_iter()
        .find(|&i| i != leader)
        .expect("a follower");
    assert!(c.replica(follower).read_barrier().await.is_err());
}

/// One read on the old leader: when it began, whether its barrier passed, what it read.
struct Read {
    began: Instant,
    passed: bool,
    value: Option<Vec<u8>>,
}

/// Reads `k` on `r` in a loop (barrier, then the engine) until `stop`.
fn read_loop(r: Arc<Replica>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Read>> {
    tokio::spawn(async move {
        let mut reads = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let began = Instant::now();
            let passed = matches!(
                tokio::time::timeout(Duration::from_millis(300), r.read_barrier()).await,
                Ok(Ok(()))
            );
            let value = if passed {
                r.db().get(b"k").expect("read the engine")
            } else {
                None
            };
            reads.push(Read {
                began,
                passed,
                value,
            });
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        reads
    })
}

async fn new_leader(c: &Cluster, among: &[NodeId], timeout: Duration) -> Option<NodeId> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(&id) = among.iter().find(|&&i| c.replica(i).is_leader()) {
            return Some(id);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_serves_no_stale_read_once_another_leader_can_exist() {
    let mut c = Cluster::new(12, 64 << 10);
    c.bootstrap(&[1, 2, 3]).await;
    let lease = Duration::from_millis(c.timing.read_lease_ms);
    assert!(c.timing.read_lease_ms < c.timing.election_timeout_ms.0);
    let old = c
        .wait_leader(Duration::from_secs(10))
        .await
        .expect("a leader");
    let others: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&i| i != old).collect();
    assert!(c.write(put("k", "v1"), Duration::from_secs(5)).await);
    let r = c.replica(old);
    r.read_barrier()
        .await
        .expect("the first barrier wins a lease");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = read_loop(r.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(50)).await;

    let isolated_at = Instant::now();
    c.net.isolate(old, &others);
    let new = new_leader(&c, &others, Duration::from_secs(10))
        .await
        .expect("the others elect a leader");
    let elected_at = Instant::now();
    c.replica(new)
        .write(put("k", "v2"))
        .await
        .expect("the new leader takes a write");
    let acked_at = Instant::now();
    // The old leader still believes it leads; its reads keep trying for a while.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(r.is_leader(), "the isolated leader heard of no new term");
    stop.store(true, Ordering::Release);
    let reads = reader.await.expect("reader");

    // The lease served reads after the leader was cut off (no quorum could answer them)...
    let in_lease = reads
        .iter()
        .filter(|x| x.passed && x.began > isolated_at)
        .count();
    assert!(in_lease > 0, "no read was served from the lease");
    for x in reads.iter().filter(|x| x.passed) {
        assert_eq!(x.value.as_deref(), Some(&b"v1"[..]));
        // ...only inside the lease won before the cut (the check follows `began`)...
        assert!(
            x.began < isolated_at + lease,
            "a read began {:?} after the cut and passed; the lease is {lease:?}",
            x.began - isolated_at
        );
    }
    // ...which ran out before another leader was elected, so no read that began after the new
    // leader's write was acknowledged passed (it could only have returned the stale v1).
    assert!(elected_at >= isolated_at + lease);
    let after = reads.iter().filter(|x| x.began > acked_at).count();
    assert!(after > 0, "no read was tried after the new write");
    assert!(reads.iter().all(|x| x.began <= acked_at || !x.passed));

    // Healed, the old leader steps down and catches up.
    c.settle(Duration::from_secs(20)).await;
    c.check_invariants();
    assert_eq!(r.db().get(b"k").expect("read").as_deref(), Some(&b"v2"[..]));
}
