//! Blob garbage collection policy: which blob files to collect, as a pure function of the version.
//!
//! The mechanism lives elsewhere: `blob::gc` runs self-contained copy tasks on an engine, and
//! `db::gc` schedules them and installs their results with one MANIFEST edit each.

pub(crate) mod picker;
