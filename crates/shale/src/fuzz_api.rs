//! Decoder entry points for fuzz targets. Not a stable API.
