//! A minimal HTTP/1.1 server for `GET /metrics` (and `/` as a hint), one request per
//! connection. Anything else gets 404; a request head over [`MAX_HEAD`] bytes or slower than
//! [`HEAD_TIMEOUT`] is dropped.

use crate::shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head read.
pub const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves until shutdown starts.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_tx.subscribe();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(answer(stream, shared.clone()));
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

async fn answer(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut head = Vec::with_capacity(1024);
    let read = tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if !matches!(read, Ok(true)) {
        return;
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => {
            let shared = shared.clone();
            let body = tokio::task::spawn_blocking(move || super::render(&shared))
                .await
                .unwrap_or_default();
            ("200 OK", body)
        }
        (b"GET", b"/") => ("200 OK", "shale: metrics at /metrics\n".to_string()),
        _ => ("404 Not Found", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
