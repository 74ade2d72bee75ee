//! `resp`: a server over the Redis protocol (`shale serve`, or Redis itself), one blocking
//! connection per client thread from a pool. Two data models (`resp.mode`):
//!
//! - `string` (default): a record is one string: insert and update are `SET`, read is `GET`,
//!   delete is `DEL`. Scans are not supported (Redis keys are unordered): a scan is an error.
//! - `ycsb`: as YCSB 0.17's Redis binding stores records. A record is a hash of `field0`,
//!   `field1`, ... Insert is `HMSET` of every field followed by `ZADD` of the key into one index
//!   sorted set (`_indices`, scored by the key's Java `hashCode`); update is `HMSET` of the changed
//!   fields (the workload sends one field without reading the record, as YCSB does); read is
//!   `HGETALL`; delete is `DEL` and `ZREM`; a scan is `ZRANGEBYSCORE` of the index from the start
//!   key's score with `LIMIT 0 count`, then `HGETALL` of each key, one round trip each. Scans
//!   therefore visit keys in hash order, not key order (verify scans only in `string` mode,
//!   where there are none).
//!
//! Statistics: the server's `INFO` fields (`shale_*` for Shale; RocksDB's names where one
//! exists), plus disk usage as the server reports it.

use super::resp_props::{DEFAULT_HOST, DEFAULT_MODE, DEFAULT_PORT};
use super::STALL_MICROS_STAT;
use super::{Backend, Statistics, COMPACT_READ_STAT, COMPACT_WRITE_STAT, DISK_USAGE_STAT};
use crate::error::{Error, Result};
use crate::props::Properties;
use crate::record::{decode_record, encode_record, Field};
use bytes::BytesMut;
use parking_lot::Mutex;
use shale_proto::resp::{decode_reply, encode_command, Reply, ReplyLimits};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One connection: a socket and its read buffer.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    out: BytesMut,
}

impl Conn {
    fn open(addr: &str, timeout: Duration, password: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .map_err(|e| Error::backend(format!("resp: cannot connect to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(timeout));
        let _ = stream.set_write_timeout(Some(timeout));
        let mut conn = Conn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            out: BytesMut::with_capacity(4 * 1024),
        };
        if !password.is_empty() {
            conn.call(&[b"AUTH".as_slice(), password.as_bytes()])?;
        }
        Ok(conn)
    }

    /// Sends one command and reads its reply; an error reply is a backend error.
    fn call(&mut self, argv: &[&[u8]]) -> Result<Reply> {
        self.out.clear();
        encode_command(&mut self.out, argv);
        self.stream
            .write_all(&self.out)
            .map_err(|e| Error::io("resp: write", e))?;
        let limits = ReplyLimits::default();
        loop {
            match decode_reply(&mut self.buf, &limits) {
                Ok(Some(Reply::Error(e))) => {
                    return Err(Error::backend(format!(
                        "resp: server error: {}",
                        String::from_utf8_lossy(&e)
                    )))
                }
                Ok(Some(reply)) => return Ok(reply),
                Ok(None) => {}
                Err(e) => return Err(Error::backend(format!("resp: bad reply: {e}"))),
            }
            self.buf.reserve(16 * 1024);
            let mut chunk = [0u8; 16 * 1024];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| Error::io("resp: read", e))?;
            if n == 0 {
                return Err(Error::backend("resp: the server closed the connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The index sorted set of the `ycsb` data model (YCSB's `RedisClient.INDEX_KEY`).
pub const INDEX_KEY: &[u8] = b"_indices";

/// How records are stored (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One string per record.
    String,
    /// A hash per record plus an index sorted set, as YCSB's Redis binding.
    Ycsb,
}

/// See the module documentation.
pub struct RespBackend {
    addr: String,
    timeout: Duration,
    password: String,
    mode: Mode,
    pool: Mutex<Vec<Conn>>,
}

/// Java's `String.hashCode` of an ASCII key: YCSB's Redis binding scores index entries by it.
pub fn java_hash(key: &[u8]) -> i32 {
    key.iter()
        .fold(0i32, |h, &b| h.wrapping_mul(31).wrapping_add(i32::from(b)))
}

/// The hash field name of record field `index` (YCSB's `field0`, ...).
fn field_name(index: u64) -> Vec<u8> {
    format!("field{index}").into_bytes()
}

/// The field index of a hash field name, or `None` for a name YCSB would not write.
fn field_index(name: &[u8]) -> Option<u64> {
    std::str::from_utf8(name.strip_prefix(b"field")?)
        .ok()?
        .parse()
        .ok()
}

/// A record from an `HGETALL` reply (flat field/value pairs, or a RESP3 map); `None` for an
/// empty hash (no record).
fn record_from_hash(reply: Reply) -> Result<Option<Vec<u8>>> {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = match reply {
        Reply::Array(items) => {
            let mut out = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(Reply::Bulk(f)), Some(Reply::Bulk(v))) = (it.next(), it.next()) {
                out.push((f.to_vec(), v.to_vec()));
            }
            out
        }
        Reply::Map(items) => items
            .into_iter()
            .filter_map(|(f, v)| match (f, v) {
                (Reply::Bulk(f), Reply::Bulk(v)) => Some((f.to_vec(), v.to_vec())),
                _ => None,
            })
            .collect(),
        Reply::Null | Reply::NullArray => Vec::new(),
        other => {
            return Err(Error::backend(format!(
                "resp: unexpected HGETALL reply {other:?}"
            )))
        }
    };
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut fields: Vec<Field<'_>> = pairs
        .iter()
        .filter_map(|(f, v)| {
            Some(Field {
                index: field_index(f)?,
                value: v,
            })
        })
        .collect();
    fields.sort_by_key(|f| f.index);
    let mut out = Vec::new();
    encode_record(&mut out, &fields);
    Ok(Some(out))
}

impl RespBackend {
    /// Connects (one connection to check the server) and optionally flushes it.
    ///
    /// # Errors
    /// `Property` for bad properties, `Backend` when the server cannot be reached.
    pub fn open(props: &Properties) -> Result<RespBackend> {
        let host = props.get_str("resp.host", DEFAULT_HOST);
        let port = props.get_u64_in("resp.port", DEFAULT_PORT.parse().unwrap_or(6379), 1, 65535)?;
        let timeout =
            Duration::from_millis(props.get_u64_in("resp.timeout_ms", 30_000, 1, 3_600_000)?);
        let mode = match props.get_str("resp.mode", DEFAULT_MODE) {
            "string" => Mode::String,
            "ycsb" => Mode::Ycsb,
            other => {
                return Err(Error::property(format!(
                    "resp.mode must be string or ycsb, not '{other}'"
                )))
            }
        };
        let backend = RespBackend {
            addr: format!("{host}:{port}"),
            timeout,
            password: props.get_str("resp.password", "").to_string(),
            mode,
            pool: Mutex::new(Vec::new()),
        };
        let mut conn = backend.take()?;
        conn.call(&[b"PING".as_slice()])?;
        if props.get_bool("resp.flushall", false)? {
            conn.call(&[b"FLUSHALL".as_slice()])?;
        }
        backend.give(conn);
        Ok(backend)
    }

    fn take(&self) -> Result<Conn> {
        match self.pool.lock().pop() {
            Some(c) => Ok(c),
            None => Conn::open(&self.addr, self.timeout, &self.password),
        }
    }

    fn give(&self, conn: Conn) {
        self.pool.lock().push(conn);
    }

    /// Runs one command on a pooled connection (a connection that failed is dropped).
    fn call(&self, argv: &[&[u8]]) -> Result<Reply> {
        let mut conn = self.take()?;
        let reply = conn.call(argv)?;
        self.give(conn);
        Ok(reply)
    }
}

impl RespBackend {
    /// `HMSET key field value ...` of the fields of `record`.
    fn hmset(&self, key: &[u8], record: &[u8]) -> Result<()> {
        let fields = decode_record(record)
            .ok_or_else(|| Error::backend("resp: the value to write is not a record"))?;
        let names: Vec<Vec<u8>> = fields.iter().map(|f| field_name(f.index)).collect();
        let mut argv: Vec<&[u8]> = Vec::with_capacity(2 + 2 * fields.len());
        argv.push(b"HMSET");
        argv.push(key);
        for (f, name) in fields.iter().zip(&names) {
            argv.push(name);
            argv.push(f.value);
        }
        self.call(&argv).map(|_| ())
    }

    /// `HGETALL key` as a record.
    fn hgetall(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        record_from_hash(self.call(&[b"HGETALL".as_slice(), key])?)
    }
}

impl Backend for RespBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.mode == Mode::Ycsb {
            return self.hgetall(key);
        }
        match self.call(&[b"GET".as_slice(), key])? {
            Reply::Bulk(v) => Ok(Some(v.to_vec())),
            Reply::Null | Reply::NullArray => Ok(None),
            other => Err(Error::backend(format!(
                "resp: unexpected GET reply {other:?}"
            ))),
        }
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        if self.mode == Mode::String {
            return Err(Error::backend(
                "resp: scans need resp.mode=ycsb (string records have no order over the Redis protocol)",
            ));
        }
        let min = java_hash(start).to_string();
        let limit = count.to_string();
        let keys = match self.call(&[
            b"ZRANGEBYSCORE".as_slice(),
            INDEX_KEY,
            min.as_bytes(),
            b"+inf",
            b"LIMIT",
            b"0",
            limit.as_bytes(),
        ])? {
            Reply::Array(items) => items,
            Reply::Set(items) => items,
            other => {
                return Err(Error::backend(format!(
                    "resp: unexpected ZRANGEBYSCORE reply {other:?}"
                )))
            }
        };
        let mut visited = 0;
        for k in keys {
            let Reply::Bulk(k) = k else { continue };
            if let Some(record) = self.hgetall(&k)? {
                visit(&k, &record);
                visited += 1;
            }
        }
        Ok(visited)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.mode == Mode::Ycsb {
            self.hmset(key, value)?;
            let score = java_hash(key).to_string();
            return self
                .call(&[b"ZADD".as_slice(), INDEX_KEY, score.as_bytes(), key])
                .map(|_| ());
        }
        self.call(&[b"SET".as_slice(), key, value]).map(|_| ())
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.mode {
            Mode::Ycsb => self.hmset(key, value),
            Mode::String => self.insert(key, value),
        }
    }

    fn updates_fields(&self) -> bool {
        self.mode == Mode::Ycsb
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.call(&[b"DEL".as_slice(), key])?;
        if self.mode == Mode::Ycsb {
            self.call(&[b"ZREM".as_slice(), INDEX_KEY, key])?;
        }
        Ok(())
    }

    fn statistics(&self) -> Result<Statistics> {
        let text = match self.call(&[b"INFO".as_slice(), b"all".as_slice()])? {
            Reply::Bulk(t) => String::from_utf8_lossy(&t).into_owned(),
            Reply::Verbatim { text, .. } => String::from_utf8_lossy(&text).into_owned(),
            other => {
                return Err(Error::backend(format!(
                    "resp: unexpected INFO reply {other:?}"
                )))
            }
        };
        Ok(statistics_from_info(&text))
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// Numeric `INFO` fields as statistics, Shale's engine fields under RocksDB's names too.
fn statistics_from_info(info: &str) -> Statistics {
    let mut s = Statistics::default();
    for line in info.lines() {
        let Some((name, value)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(v) = value.parse::<u64>() else {
            continue;
        };
        let alias = match name {
            "shale_compaction_bytes_read" => Some(COMPACT_READ_STAT),
            "shale_compaction_bytes_written" => Some(COMPACT_WRITE_STAT),
            "shale_stall_micros" => Some(STALL_MICROS_STAT),
            "shale_on_disk_bytes" => Some(DISK_USAGE_STAT),
            _ => None,
        };
        if let Some(alias) = alias {
            s.set(alias, v);
        }
        if name.starts_with("shale_") || name.starts_with("total_") || name == "used_memory" {
            s.set(name, v);
        }
    }
    if s.get(DISK_USAGE_STAT).is_none() {
        s.set(DISK_USAGE_STAT, 0);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes_match_java() {
        // "user1".hashCode() and "".hashCode() in Java.
        assert_eq!(java_hash(b""), 0);
        assert_eq!(java_hash(b"user1"), 111_578_566);
        assert_eq!(java_hash(b"user6284781860667377211"), {
            let mut h: i32 = 0;
            for c in "user6284781860667377211".chars() {
                h = h.wrapping_mul(31).wrapping_add(c as i32);
            }
            h
        });
    }

    #[test]
    fn hgetall_replies_become_records_in_field_order() {
        let reply = Reply::Array(vec![
            Reply::bulk("field1"),
            Reply::bulk("b"),
            Reply::bulk("field0"),
            Reply::bulk("a"),
        ]);
        let record = record_from_hash(reply).unwrap().unwrap();
        let fields = decode_record(&record).unwrap();
        assert_eq!(
            fields,
            vec![
                Field {
                    index: 0,
                    value: b"a"
                },
                Field {
                    index: 1,
                    value: b"b"
                }
            ]
        );
        assert_eq!(record_from_hash(Reply::Array(vec![])).unwrap(), None);
    }

    #[test]
    fn info_fields_become_statistics_with_rocksdb_names() {
        let s = statistics_from_info(
            "# Persistence\r\nshale_compaction_bytes_read:10\r\nshale_on_disk_bytes:99\r\nrole:master\r\n",
        );
        assert_eq!(s.get(COMPACT_READ_STAT), Some(10));
        assert_eq!(s.get(DISK_USAGE_STAT), Some(99));
        assert_eq!(s.get("shale_on_disk_bytes"), Some(99));
        assert_eq!(s.get("role"), None);
    }
}
