//! The write-ahead log and the record framing shared with the MANIFEST. See `docs/format/wal.md`.
