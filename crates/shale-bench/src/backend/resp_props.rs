//! Properties of the `resp` backend: where the server is and how to prepare it.

use crate::props::PropSpec;

/// Default `resp.host`.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// Default `resp.port`.
pub const DEFAULT_PORT: &str = "6379";
/// Default `resp.mode`: one string per record.
pub const DEFAULT_MODE: &str = "string";

/// The `resp.*` properties.
pub(super) static PROPS: &[PropSpec] = &[
    PropSpec::new("resp.host", DEFAULT_HOST, "server address"),
    PropSpec::new("resp.port", DEFAULT_PORT, "server port"),
    PropSpec::new("resp.password", "", "AUTH password, if the server has one"),
    PropSpec::new(
        "resp.mode",
        DEFAULT_MODE,
        "string: a record is one string (SET/GET); ycsb: a hash per record plus an index sorted set, as YCSB's Redis binding",
    ),
    PropSpec::new(
        "resp.flushall",
        "false",
        "send FLUSHALL when opening (the RESP counterpart of <name>.destroy)",
    ),
    PropSpec::new(
        "resp.timeout_ms",
        "30000",
        "socket read and write timeout in milliseconds",
    ),
];
