//! Version edits and their encoding. See `docs/format/manifest.md`.
