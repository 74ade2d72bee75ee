//! The shared block cache.
