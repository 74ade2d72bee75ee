//! Membership: a node added to a loaded cluster catches up by snapshot (the log it would need is
//! purged), a node is removed, a dead one is replaced.

mod common;

use common::{info, put, Cluster};
use shale_repl::network::local::Faults;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_added_to_a_loaded_cluster_catches_up_by_snapshot_then_nodes_leave_and_are_replaced()
{
    let mut c = Cluster::new(11, 16 << 10);
    c.bootstrap(&[1, 2, 3]).await;
    let mut acked = Vec::new();
    let value = |i: usize| format!("{i:05}-{}", "v".repeat(200 + i % 300));
    for i in 0..400 {
        if c.write(
            put(&format!("key{i:04}"), &value(i)),
            Duration::from_secs(3),
        )
        .await
        {
            acked.push(i);
        }
    }
    assert!(
        acked.len() > 390,
        "writes on a healthy cluster are acknowledged"
    );
    // Flushes happened, snapshots followed them, and the log was purged up to them.
    let deadline = Instant::now() + Duration::from_secs(15);
    let purged = loop {
        let leader = c
            .wait_leader(Duration::from_secs(5))
            .await
            .expect("a leader");
        if let Some(p) = c.replica(leader).status().purged_index {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the log was never purged: {:?}",
            c.describe()
        );
        c.write(put("tick", "tock"), Duration::from_secs(1)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // A new node joins; a damaged or cut transfer is refused and sent again.
    c.net.set_faults(Faults {
        snapshot_damage: 0.05,
        snapshot_cut: 0.05,
        ..Faults::default()
    });
    c.start(4).await;
    let leader = c
        .wait_leader(Duration::from_secs(5))
        .await
        .expect("a leader");
    c.replica(leader)
        .add_node(4, info(4))
        .await
        .expect("add node 4");
    c.settle(Duration::from_secs(30)).await;
    c.check_invariants();
    let first = c.nodes[&4].applied.lock().by_incarnation[0]
        .first()
        .copied();
    assert!(
        first.is_none_or(|f| f > purged),
        "node 4 started past the purged log ({first:?} <= {purged}): it caught up by snapshot"
    );
    assert!(c.net.counts().snapshots_sent > 0);
    let status = c.replica(4).status();
    assert!(status.voters.contains(&4), "{status:?}");

    // Node 1 leaves (perhaps the leader); the others go on.
    let leader = c
        .wait_leader(Duration::from_secs(5))
        .await
        .expect("a leader");
    c.replica(leader)
        .remove_node(1)
        .await
        .expect("remove node 1");
    c.retire(1).await;
    assert!(
        c.write(put("after-removal", "1"), Duration::from_secs(5))
            .await
    );

    // Node 2 dies and is replaced by node 5.
    c.retire(2).await;
    let leader = c
        .wait_leader(Duration::from_secs(10))
        .await
        .expect("a leader");
    c.replica(leader)
        .remove_node(2)
        .await
        .expect("remove dead node 2");
    c.start(5).await;
    let leader = c
        .wait_leader(Duration::from_secs(5))
        .await
        .expect("a leader");
    c.replica(leader)
        .add_node(5, info(5))
        .await
        .expect("add node 5");
    assert!(
        c.write(put("after-replacement", "1"), Duration::from_secs(5))
            .await
    );
    c.settle(Duration::from_secs(30)).await;
    c.check_invariants();
    let voters = c
        .replica(
            c.wait_leader(Duration::from_secs(5))
                .await
                .expect("a leader"),
        )
        .status()
        .voters;
    assert_eq!(voters.into_iter().collect::<Vec<_>>(), vec![3, 4, 5]);
    for id in [3, 4, 5] {
        let r = c.replica(id);
        for &i in &acked {
            let got = r.db().get(format!("key{i:04}")).expect("read");
            assert_eq!(
                got.as_deref(),
                Some(value(i).as_bytes()),
                "node {id} key {i}"
            );
        }
        assert!(r.db().get("after-replacement").expect("read").is_some());
    }
    for id in c.running() {
        c.kill(id, false).await;
    }
}
