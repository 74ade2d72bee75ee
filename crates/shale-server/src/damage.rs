//! Unreadable data met by the read-only listings: KEYS, SCAN and the expiry count of
//! `INFO keyspace`.
//!
//! A damaged SST block or blob record must not make every key unlistable. The listings scan with
//! the engine's `ReadOptions::skip_unreadable`: they answer with every key they can read, and
//! each piece of data they stepped over is counted (`shale_scan_skipped_blocks` in `INFO stats`,
//! `shale_scan_skipped_blocks_total` in the metrics) and logged at ERROR with its file, offset,
//! key range and error, at most once every [`DAMAGE_LOG_INTERVAL`] (the lines in between are
//! counted in the next one). DBSIZE and the key counts of `INFO keyspace` are count records kept
//! with every batch, not walks: they stay exact, so a listing shorter than DBSIZE is the sign of
//! damage a client can see. Everything else (reads of one key, and writes, which must never be
//! built from partial data) still fails with the engine's error.
//!
//! Concurrency: the log's rate limit is one lock per process, taken only when data was skipped.

use crate::metrics::{self, Metrics};
use crate::store::format;
use crate::store::Skips;
use shale::{ReadOptions, Skipped};
use std::fmt::Write;
use std::ops::Bound;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The read options of a listing: step over unreadable data.
pub const SKIP_UNREADABLE: ReadOptions = ReadOptions {
    skip_unreadable: true,
};

/// The ERROR line about skipped data is written at most this often.
pub const DAMAGE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Pieces named in one log line; the others are only counted in it.
const PIECES_PER_LINE: usize = 4;

/// When the last line was written, and the reports since then that wrote none.
static LOG: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));

/// Counts and logs (rate-limited) what `listing` (`KEYS`, `SCAN`, ...) skipped. Does nothing when
/// it skipped nothing.
pub fn report(metrics: &Metrics, listing: &str, skips: &Skips) {
    if skips.count == 0 {
        return;
    }
    metrics::add(&metrics.scan_skipped, skips.count);
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.0.is_some_and(|t| t.elapsed() < DAMAGE_LOG_INTERVAL) {
        log.1 += 1;
        return;
    }
    let suppressed = std::mem::take(&mut log.1);
    log.0 = Some(Instant::now());
    drop(log);
    tracing::error!(
        suppressed,
        "{listing} skipped {} piece(s) of unreadable data and answered with the keys it could read: {}",
        skips.count,
        describe(skips)
    );
}

/// The skipped pieces as text: file, offset, key range and error of the first few.
pub fn describe(skips: &Skips) -> String {
    let mut out = String::new();
    for (i, s) in skips.pieces.iter().take(PIECES_PER_LINE).enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(&piece(s));
    }
    let more = skips.count.saturating_sub(PIECES_PER_LINE as u64);
    if more > 0 {
        let _ = write!(out, "; and {more} more");
    }
    out
}

/// One skipped piece: `000012.sst offset 20480 (block): keys after X through Y: error`.
fn piece(s: &Skipped) -> String {
    let start = match &s.start {
        Bound::Included(k) => format!("from {}", engine_key(k)),
        Bound::Excluded(k) => format!("after {}", engine_key(k)),
        Bound::Unbounded => "from the first".to_string(),
    };
    let end = match &s.end {
        Bound::Included(k) => format!("through {}", engine_key(k)),
        Bound::Excluded(k) => format!("before {}", engine_key(k)),
        Bound::Unbounded => "to the last".to_string(),
    };
    let error = s.error.to_string().replace(['\r', '\n'], " ");
    format!(
        "{} offset {} ({:?}): engine keys {start} {end}: {error}",
        s.file, s.offset, s.kind
    )
}

/// An engine key for a log line: a meta record key as its database, key hash and user key (an
/// index key between two blocks may stop after the hash), anything else as escaped bytes.
fn engine_key(k: &[u8]) -> String {
    match k {
        [format::META, db, h0, h1] => {
            format!("db {db} hash {h0:02x}{h1:02x}")
        }
        [format::META, db, h0, h1, user @ ..] => format!(
            "db {db} hash {h0:02x}{h1:02x} key {:?}",
            String::from_utf8_lossy(user)
        ),
        _ => format!("\"{}\"", k.escape_ascii()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_names_file_offset_and_keys() {
        let skips = Skips {
            count: 1,
            pieces: vec![Skipped {
                kind: shale::SkippedKind::Block,
                file: "000012.sst".into(),
                offset: 20480,
                start: Bound::Excluded(format::meta_key(0, b"alpha")),
                end: Bound::Included(b"\0cnt\x01".to_vec()),
                error: shale::Error::new(shale::ErrorKind::Corruption, "bad\nchecksum"),
            }],
        };
        let text = describe(&skips);
        let hash = format::key_hash(b"alpha");
        let want = format!(
            "000012.sst offset 20480 (Block): engine keys after db 0 hash {hash:04x} key \"alpha\" \
             through \"\\x00cnt\\x01\": Corruption: bad checksum"
        );
        assert_eq!(text, want);
        assert!(!text.contains('\n'), "{text}");
    }
}
