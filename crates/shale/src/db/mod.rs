//! The database: open, write path, reads, background work.
