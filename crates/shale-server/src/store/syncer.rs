//! Group commit for `appendfsync always` at the server level.
//!
//! A batch under `always` commits its writes with buffered durability (so its stripe locks are
//! released at once, not held across an fsync), then asks the syncer for a ticket and sends its
//! replies only when the ticket completes. The syncer thread fsyncs the WAL (`Db::sync_wal`) for
//! every ticket asked for before that fsync began: one fsync covers every batch of every
//! connection that committed meanwhile, as Redis's event loop covers every client of one
//! iteration with one fsync.
//!
//! Guarantee: a ticket completes `Ok` only after an fsync that started after its batch's writes
//! were in the WAL, so an acknowledged write survives power loss. As in Redis, other clients may
//! read a write before it is synced.
//!
//! Before each fsync the syncer waits (at most [`GATHER_WAIT`]) while batches are still executing,
//! so they join this fsync rather than wait for the next.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Longest wait for executing batches before an fsync.
pub const GATHER_WAIT: Duration = Duration::from_micros(200);

/// The outcome of a ticket: `Err` carries the fsync's error text.
pub type SyncResult = Result<(), String>;

#[derive(Default)]
struct State {
    waiters: Vec<oneshot::Sender<SyncResult>>,
    stop: bool,
}

/// See the module documentation.
#[derive(Default)]
pub struct Syncer {
    state: Mutex<State>,
    cv: Condvar,
    executing: AtomicUsize,
}

/// Marks a batch as executing until dropped (see [`Syncer::executing`]).
pub struct Executing<'a>(&'a Syncer);

impl Drop for Executing<'_> {
    fn drop(&mut self) {
        self.0.executing.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Syncer {
    /// Marks a batch with writes as executing; the next fsync waits briefly for it.
    pub fn executing(&self) -> Executing<'_> {
        self.executing.fetch_add(1, Ordering::AcqRel);
        Executing(self)
    }

    /// A ticket that completes after the next fsync that starts from now.
    pub fn ticket(&self) -> oneshot::Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        let mut s = self.state.lock();
        if s.stop {
            let _ = tx.send(Err("the server is shutting down".into()));
        } else {
            s.waiters.push(tx);
            self.cv.notify_one();
        }
        rx
    }

    /// Stops the thread after it has served the tickets already asked for.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.cv.notify_one();
    }

    /// The syncer thread's loop over `sync` (normally `Db::sync_wal`); returns after
    /// [`Syncer::stop`] once no ticket is left.
    pub fn serve(&self, sync: impl Fn() -> shale::Result<()>) {
        loop {
            {
                let mut s = self.state.lock();
                while s.waiters.is_empty() && !s.stop {
                    self.cv.wait(&mut s);
                }
                if s.waiters.is_empty() && s.stop {
                    return;
                }
            }
            let deadline = Instant::now() + GATHER_WAIT;
            while self.executing.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            let waiters = std::mem::take(&mut self.state.lock().waiters);
            let result = sync().map_err(|e| e.to_string());
            for w in waiters {
                let _ = w.send(result.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn every_ticket_completes_after_a_later_sync() {
        let syncer = Arc::new(Syncer::default());
        let syncs = Arc::new(AtomicU64::new(0));
        let (s2, c2) = (syncer.clone(), syncs.clone());
        let thread = std::thread::spawn(move || {
            s2.serve(|| {
                c2.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        });
        let tickets: Vec<_> = (0..100).map(|_| syncer.ticket()).collect();
        for t in tickets {
            assert_eq!(t.blocking_recv().unwrap(), Ok(()));
        }
        assert!(syncs.load(Ordering::SeqCst) >= 1);
        syncer.stop();
        thread.join().unwrap();
        assert!(syncer.ticket().blocking_recv().unwrap().is_err());
    }
}
