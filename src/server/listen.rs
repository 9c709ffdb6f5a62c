//! Accepting connections (hyper, HTTP/1 and HTTP/2) with the limits `axum::serve` lacks: a time
//! limit on request heads and bodies, a cap on connections that have not sent a complete
//! request head yet (a slow-loris client holds one each), the error shape on hyper's own
//! refusals (a request target or head too large), and a graceful end.

use crate::sync::Locked;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::error::ToolError;

/// How long a client may take to send a request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a client may pause while sending a request body.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections still waiting for their first complete request head, at most; past it, new
/// connections wait in the listen backlog until one sends its head or times out.
pub const MAX_HALF_OPEN: usize = 256;

/// Serves `router` on `listener` until `stop` resolves; returns what lets the open connections
/// finish.
pub async fn accept_until(
    listener: TcpListener,
    router: Router,
    stop: impl Future<Output = ()>,
) -> GracefulShutdown {
    let service = RequestBodyTimeoutLayer::new(BODY_READ_TIMEOUT).layer(router);
    let half_open = Arc::new(Semaphore::new(MAX_HALF_OPEN));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = half_open.clone().acquire_owned() => permit.expect("the semaphore stays open"),
            () = &mut stop => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, typically: wait rather than spin.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        // Given back at the first request head, or when the connection ends without one.
        let slot = Arc::new(Mutex::new(Some(permit)));
        let held = slot.clone();
        let service = service.clone();
        let handler = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            held.locked().take();
            request.extensions_mut().insert(ConnectInfo(peer));
            service.clone().oneshot(request)
        });
        let io = TokioIo::new(ErrorShaped::new(stream));
        let connection = builder
            .serve_connection_with_upgrades(io, handler)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => Some(ended),
                () = tokio::time::sleep(HEADER_READ_TIMEOUT) => None,
            };
            let ended = match ended {
                Some(ended) => ended,
                // hyper's own head timeout starts only once the protocol is known (HTTP/1),
                // and HTTP/2 has none: a connection without a request by now is dropped.
                None if slot.locked().is_some() => return,
                None => connection.await,
            };
            if let Err(error) = ended {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    graceful
}

/// A connection whose canned error answer from hyper (414 URI Too Long, 431 Request Header
/// Fields Too Large: the request never reaches the router) gets the tool error shape as body.
/// Only the connection's first write can be such an answer; nothing later is looked at, so no
/// response body (page text is anyone's) can be mistaken for one.
struct ErrorShaped {
    stream: TcpStream,
    /// Something was written already.
    wrote: bool,
    /// The replacement answer still to write, and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
}

impl ErrorShaped {
    fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            wrote: false,
            pending: None,
        }
    }
}

/// The answer replacing hyper's bodiless one that starts `head`, if it is one of those.
fn shaped_answer(head: &[u8]) -> Option<Vec<u8>> {
    let (status, error) = if head.starts_with(b"HTTP/1.1 414 ") {
        (
            "414 URI Too Long",
            ToolError::invalid("the request target is too long")
                .with_hint("send the tool's arguments as a JSON body, not in the URL"),
        )
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        (
            "431 Request Header Fields Too Large",
            ToolError::invalid("the request headers are too large")
                .with_hint("send fewer or shorter headers"),
        )
    } else {
        return None;
    };
    let body = error.to_json().to_string();
    Some(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl AsyncRead for ErrorShaped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ErrorShaped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.wrote {
            self.wrote = true;
            self.pending = shaped_answer(buf).map(|answer| (answer, 0));
        }
        let this = &mut *self;
        let Some((answer, written)) = this.pending.as_mut() else {
            return Pin::new(&mut this.stream).poll_write(cx, buf);
        };
        // hyper writes its canned answer in one go and closes: the replacement is written
        // whole (over as many polls as it takes), and hyper is told its bytes went out.
        while *written < answer.len() {
            match Pin::new(&mut this.stream).poll_write(cx, &answer[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_refusals_are_reshaped() {
        let answer = shaped_answer(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n")
            .expect("a 414 is reshaped");
        let text = String::from_utf8(answer).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT");
        assert!(shaped_answer(b"HTTP/1.1 431 Request Header Fields Too Large\r\n").is_some());
        assert!(shaped_answer(b"HTTP/1.1 200 OK\r\n").is_none());
        assert!(shaped_answer(b"{\"HTTP/1.1 414 \"}").is_none());
    }
}
