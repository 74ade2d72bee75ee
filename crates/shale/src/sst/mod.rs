//! Sorted string tables: the on-disk format of LSM levels. See `docs/format/sstable.md`.
