//! Signals: SIGTERM and SIGINT start a graceful shutdown (see [`crate::server`]).

use crate::shared::Shared;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// Waits for SIGTERM or SIGINT and starts the shutdown.
pub async fn on_signals(shared: Arc<Shared>) {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    println!("received {name}; shutting down");
    shared.request_shutdown();
}
