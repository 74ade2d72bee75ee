//! An in-memory file system that keeps written and synced state apart.
