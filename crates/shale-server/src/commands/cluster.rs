//! Cluster commands: `READONLY` and `READWRITE`, as Redis Cluster spells them.

use super::{CmdResult, Ctx};
use bytes::Bytes;

/// `READONLY`: this connection's reads run on the node it is connected to, even a follower
/// (possibly stale data); writes still go to the leader.
pub(super) fn readonly(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    ctx.session.readonly = true;
    ctx.w().simple(b"OK");
    Ok(())
}

/// `READWRITE`: back to linearizable reads (served by the leader).
pub(super) fn readwrite(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    ctx.session.readonly = false;
    ctx.w().simple(b"OK");
    Ok(())
}
