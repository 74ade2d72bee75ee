//! CONFIG GET, CONFIG SET, CONFIG RESETSTAT.
//!
//! `appendfsync` changes the server's durability at run time. The other settings CONFIG SET
//! accepts are Redis's knobs that clients and test harnesses set and read back (encoding sizes,
//! `maxmemory`, `lazyfree-*`, ...): Shale has one encoding per type and no eviction, so it
//! remembers their values ([`Knobs`]) and answers CONFIG GET with them, and they change nothing
//! else. A setting it does not know is refused with Redis's error.

use super::args::{self, is};
use super::glob::Pattern;
use super::{CmdError, CmdResult, Ctx};
use crate::config::Appendfsync;
use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::borrow::Cow;

/// Redis knobs accepted and remembered, with Redis 7.0's defaults. Aliases (the older `ziplist`
/// names) share their value with the name after `=`.
const KNOBS: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("hash-max-ziplist-entries", "=hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "=hash-max-listpack-value"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "=zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "=zset-max-listpack-value"),
    ("list-max-listpack-size", "-2"),
    ("list-max-ziplist-size", "=list-max-listpack-size"),
    ("list-compress-depth", "0"),
    ("set-max-intset-entries", "512"),
    ("stream-node-max-entries", "100"),
    ("stream-node-max-bytes", "4096"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("lua-time-limit", "5000"),
    ("busy-reply-threshold", "=lua-time-limit"),
    ("notify-keyspace-events", ""),
    ("latency-tracking", "yes"),
    ("activerehashing", "yes"),
    ("appendonly", "yes"),
    ("aof-use-rdb-preamble", "yes"),
    ("save", ""),
    ("timeout", "0"),
    ("loglevel", "notice"),
    ("databases", "16"),
    ("min-replicas-to-write", "0"),
    ("replica-serve-stale-data", "yes"),
    ("replica-read-only", "yes"),
    ("rdb-key-save-delay", "0"),
    ("slowlog-log-slower-than", "10000"),
    ("slowlog-max-len", "128"),
    ("latency-monitor-threshold", "0"),
    ("close-on-replica-write", "yes"),
    ("enable-debug-command", "yes"),
];

/// The values CONFIG SET gave Redis's knobs (see the module documentation).
#[derive(Default)]
pub struct Knobs {
    values: Mutex<FxHashMap<&'static str, String>>,
}

impl Knobs {
    /// The canonical name of knob `name` (lower case), following an alias.
    fn canonical(name: &str) -> Option<&'static str> {
        let (known, default) = KNOBS.iter().find(|(n, _)| *n == name)?;
        match default.strip_prefix('=') {
            Some(target) => KNOBS.iter().find(|(n, _)| *n == target).map(|(n, _)| *n),
            None => Some(known),
        }
    }

    fn get(&self, name: &'static str) -> String {
        if let Some(v) = self.values.lock().get(name) {
            return v.clone();
        }
        let canonical = Knobs::canonical(name).unwrap_or(name);
        KNOBS
            .iter()
            .find(|(n, _)| *n == canonical)
            .map_or(String::new(), |(_, d)| d.to_string())
    }

    fn set(&self, name: &str, value: &str) -> bool {
        match Knobs::canonical(name) {
            Some(c) => {
                self.values.lock().insert(c, value.to_string());
                true
            }
            None => false,
        }
    }
}

/// Every parameter CONFIG GET knows, with its current value.
fn params(ctx: &Ctx<'_, '_>) -> Vec<(Cow<'static, str>, String)> {
    let shared = ctx.shared;
    let mut out: Vec<(Cow<'static, str>, String)> = shared
        .config
        .entries()
        .into_iter()
        .filter(|(name, _)| *name != "appendfsync" && *name != "requirepass")
        .map(|(n, v)| (Cow::Borrowed(n), v))
        .collect();
    out.push((
        Cow::Borrowed("appendfsync"),
        shared.store.appendfsync().name().to_string(),
    ));
    out.push((
        Cow::Borrowed("requirepass"),
        shared.config.requirepass.clone().unwrap_or_default(),
    ));
    for (name, _) in KNOBS {
        if !out.iter().any(|(n, _)| n == name) {
            out.push((Cow::Borrowed(name), shared.knobs.get(name)));
        }
    }
    out
}

pub(super) fn config(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if is(sub, "get") {
        if argv.len() < 3 {
            return Err(super::wrong_arity("config|get"));
        }
        let patterns: Vec<Pattern> = argv[2..].iter().map(|p| Pattern::nocase(p)).collect();
        let found: Vec<_> = params(ctx)
            .into_iter()
            .filter(|(name, _)| patterns.iter().any(|p| p.matches(name.as_bytes())))
            .collect();
        let mut w = ctx.w();
        w.map(found.len());
        for (n, v) in found {
            w.bulk(n.as_bytes());
            w.bulk(v.as_bytes());
        }
    } else if is(sub, "set") {
        if argv.len() < 4 || !argv.len().is_multiple_of(2) {
            return Err(super::wrong_arity("config|set"));
        }
        // Validate every pair before applying any, as Redis does.
        let mut appendfsync = None;
        for pair in argv[2..].chunks_exact(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            if name == "appendfsync" {
                let mode = std::str::from_utf8(&pair[1])
                    .ok()
                    .and_then(Appendfsync::parse)
                    .ok_or_else(|| {
                        CmdError::msg("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: always, everysec, no")
                    })?;
                appendfsync = Some(mode);
            } else if Knobs::canonical(&name).is_none() {
                return Err(CmdError::Msg(
                    format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                        args::printable(&pair[0], 64)
                    )
                    .into(),
                ));
            }
        }
        for pair in argv[2..].chunks_exact(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            ctx.shared
                .knobs
                .set(&name, &String::from_utf8_lossy(&pair[1]));
        }
        if let Some(mode) = appendfsync {
            ctx.shared.store.set_appendfsync(mode);
        }
        ctx.w().ok();
    } else if is(sub, "resetstat") || is(sub, "rewrite") {
        ctx.w().ok();
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Try CONFIG HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}
