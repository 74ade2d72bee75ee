//! Versions: the set of live files, the edits that change it, and the MANIFEST that records them.

pub(crate) mod blob_files;
pub(crate) mod edit;
pub(crate) mod set;
#[allow(clippy::module_inception)]
pub(crate) mod version;
