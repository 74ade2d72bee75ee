//! Names of the files in a database directory.
//!
//! ```text
//! 000007.log        a WAL
//! 000012.sst        an SST
//! 000014.blob       a blob file (values separated from their keys)
//! MANIFEST-000005   a log of version edits
//! CURRENT           names the live MANIFEST
//! LOCK              held while the database is open
//! 000013.dbtmp      a temporary file (removed at open)
//! ```
//!
//! Do not change: on-disk format (recovery finds files by these names).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::path::{Path, PathBuf};

/// The kinds of file Shale keeps in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FileKind {
    Wal(u64),
    Table(u64),
    Blob(u64),
    Manifest(u64),
    Current,
    Lock,
    Temp(u64),
}

pub(crate) fn wal(dir: &Path, number: u64) -> PathBuf {
    dir.join(wal_name(number))
}

/// A WAL's file name, for messages (relative to the data directory).
pub(crate) fn wal_name(number: u64) -> String {
    format!("{number:06}.log")
}

pub(crate) fn table(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

pub(crate) fn blob(dir: &Path, number: u64) -> PathBuf {
    dir.join(blob_name(number))
}

/// A blob file's name, for messages (relative to the data directory).
pub(crate) fn blob_name(number: u64) -> String {
    format!("{number:06}.blob")
}

pub(crate) fn manifest(dir: &Path, number: u64) -> PathBuf {
    dir.join(manifest_name(number))
}

pub(crate) fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

pub(crate) fn current(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

pub(crate) fn lock(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

#[cfg(test)]
pub(crate) fn temp(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// Classifies a directory entry; `None` for files that are not Shale's.
pub(crate) fn parse(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return parse_number(n).map(FileKind::Manifest);
    }
    let (stem, ext) = name.split_once('.')?;
    let number = parse_number(stem)?;
    match ext {
        "log" => Some(FileKind::Wal(number)),
        "sst" => Some(FileKind::Table(number)),
        "blob" => Some(FileKind::Blob(number)),
        "dbtmp" => Some(FileKind::Temp(number)),
        _ => None,
    }
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_kind() {
        let dir = Path::new("db");
        for (path, kind) in [
            (wal(dir, 7), FileKind::Wal(7)),
            (table(dir, 1234567), FileKind::Table(1234567)),
            (blob(dir, 14), FileKind::Blob(14)),
            (manifest(dir, 5), FileKind::Manifest(5)),
            (current(dir), FileKind::Current),
            (lock(dir), FileKind::Lock),
            (temp(dir, 3), FileKind::Temp(3)),
        ] {
            assert_eq!(
                parse(path.file_name().unwrap().to_str().unwrap()),
                Some(kind)
            );
        }
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse("MANIFEST-"), None);
        assert_eq!(parse("-1.sst"), None);
    }
}
