//! Concurrent clients against an in-process cluster under faults (lost and late messages, an
//! isolated leader, a follower's power loss); the history of every operation's invocation and
//! response is checked for linearizability per key.

mod common;

use common::{put, Cluster};
use shale_repl::lincheck::{self, Event, Op, Verdict};
use shale_repl::network::local::Faults;
use shale_repl::{ReplError, Replica, ReplicationMode};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: u64 = 4;
const KEYS: u64 = 5;

async fn on_leader<T, F, Fut>(nodes: &[Arc<Replica>], mut op: F) -> Result<T, ReplError>
where
    F: FnMut(Arc<Replica>) -> Fut,
    Fut: std::future::Future<Output = Result<T, ReplError>>,
{
    let mut last = ReplError::NotLeader { leader: None };
    for r in nodes {
        if !r.is_leader() {
            continue;
        }
        match op(r.clone()).await {
            Err(e @ ReplError::NotLeader { .. }) => last = e,
            other => return other,
        }
    }
    Err(last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_a_linearizable_history_through_faults() {
    run(ReplicationMode::Baseline).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_a_linearizable_history_through_faults_in_rubble_mode() {
    run(ReplicationMode::Rubble).await;
}

async fn run(mode: ReplicationMode) {
    let mut c = Cluster::with_mode(5, 8 << 10, mode);
    c.bootstrap(&[1, 2, 3]).await;
    let epoch = Instant::now();
    let nodes: Vec<Arc<Replica>> = [1, 2, 3].iter().map(|&i| c.replica(i)).collect();
    let run_for = Duration::from_secs(4);
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let nodes = nodes.clone();
        clients.push(tokio::spawn(async move {
            let mut history = Vec::new();
            let mut n = 0u64;
            let mut x = client.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            while epoch.elapsed() < run_for {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = format!("k{}", x % KEYS);
                let invoked = epoch.elapsed().as_micros() as u64;
                if x % 2 == 0 {
                    n += 1;
                    let value = format!("c{client}-{n}");
                    let r = tokio::time::timeout(
                        Duration::from_secs(2),
                        on_leader(&nodes, |r| {
                            let b = put(&key, &value);
                            async move { r.write(b).await }
                        }),
                    )
                    .await;
                    let returned = epoch.elapsed().as_micros() as u64;
                    let outcome = match r {
                        Ok(Ok(_)) => Some(returned),
                        // Refused before it was proposed: it never happened.
                        Ok(Err(ReplError::NotLeader { .. })) => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                        _ => None,
                    };
                    history.push(Event {
                        key: key.into_bytes(),
                        op: Op::Write(value.into_bytes()),
                        invoked,
                        returned: outcome,
                    });
                } else {
                    let r = tokio::time::timeout(
                        Duration::from_secs(2),
                        on_leader(&nodes, |r| {
                            let key = key.clone();
                            async move {
                                r.read_barrier().await?;
                                Ok(r.db().get(&key)?)
                            }
                        }),
                    )
                    .await;
                    if let Ok(Ok(value)) = r {
                        history.push(Event {
                            key: key.into_bytes(),
                            op: Op::Read(value),
                            invoked,
                            returned: Some(epoch.elapsed().as_micros() as u64),
                        });
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            history
        }));
    }
    // Faults while the clients run.
    c.net.set_faults(Faults {
        drop: 0.05,
        duplicate: 0.05,
        delay: 0.2,
        max_delay: Duration::from_millis(20),
        ..Faults::default()
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let leader = c
        .wait_leader(Duration::from_secs(2))
        .await
        .expect("a leader");
    c.net.isolate(leader, &[1, 2, 3]);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    c.net.heal();
    let history: Vec<Event> = {
        let mut all = Vec::new();
        for h in clients {
            all.extend(h.await.expect("client"));
        }
        all
    };
    let writes = history
        .iter()
        .filter(|e| matches!(e.op, Op::Write(_)))
        .count();
    let reads = history.len() - writes;
    eprintln!("{writes} writes, {reads} reads");
    assert!(
        writes > 20 && reads > 20,
        "the clients got work done: {writes} writes, {reads} reads"
    );
    let verdict = lincheck::check(&history);
    if verdict != Verdict::Linearizable {
        if let Ok(path) = std::env::var("SHALE_LIN_DUMP") {
            let lines: Vec<String> = history
                .iter()
                .map(|e| {
                    let (kind, v) = match &e.op {
                        Op::Write(v) => ("w", String::from_utf8_lossy(v).into_owned()),
                        Op::Read(v) => (
                            "r",
                            v.as_ref()
                                .map_or("-".into(), |v| String::from_utf8_lossy(v).into_owned()),
                        ),
                    };
                    format!(
                        "{} {kind} {v} {} {}",
                        String::from_utf8_lossy(&e.key),
                        e.invoked,
                        e.returned.map_or(-1, |r| r as i64)
                    )
                })
                .collect();
            std::fs::write(path, lines.join("\n")).expect("dump");
        }
    }
    assert_eq!(verdict, Verdict::Linearizable);
    c.settle(Duration::from_secs(30)).await;
    c.check_invariants();
    for id in c.running() {
        c.kill(id, false).await;
    }
}
