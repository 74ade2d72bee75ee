//! `resp`: a server over the Redis protocol (`shale serve`, or Redis itself), one blocking
//! connection per client thread from a pool. Records are plain strings: insert and update are
//! `SET`, read is `GET`, delete is `DEL`. Scans are not supported (Redis keys are unordered; the
//! YCSB Redis binding's sorted-set index is a different data model): a scan is a backend error.
//!
//! Statistics: the server's `INFO` fields (`shale_*` for Shale; RocksDB's names where one
//! exists), plus disk usage as the server reports it.

use super::resp_props::{DEFAULT_HOST, DEFAULT_PORT};
use super::STALL_MICROS_STAT;
use super::{Backend, Statistics, COMPACT_READ_STAT, COMPACT_WRITE_STAT, DISK_USAGE_STAT};
use crate::error::{Error, Result};
use crate::props::Properties;
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

/// See the module documentation.
pub struct RespBackend {
    addr: String,
    timeout: Duration,
    password: String,
    pool: Mutex<Vec<Conn>>,
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
        let backend = RespBackend {
            addr: format!("{host}:{port}"),
            timeout,
            password: props.get_str("resp.password", "").to_string(),
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

impl Backend for RespBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
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
        _start: &[u8],
        _count: usize,
        _visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        Err(Error::backend(
            "resp: scans are not supported over the Redis protocol (use workloads without scans)",
        ))
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.call(&[b"SET".as_slice(), key, value]).map(|_| ())
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.insert(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.call(&[b"DEL".as_slice(), key]).map(|_| ())
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
