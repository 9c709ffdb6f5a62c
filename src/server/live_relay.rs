//! The live view of a session another instance holds: the person's WebSocket is accepted here
//! (its link and `Origin` checked here, as for a session of this instance) and bridged message
//! by message to the holder's own `/live/{session}/ws`, which checks the link again.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Bridges `viewer` to the live view of `session` at the instance reached at `holder`.
pub(super) async fn relay(viewer: WebSocket, holder: String, session: String, cap: String) {
    let upstream = match connect(&holder, &session, &cap).await {
        Ok(upstream) => upstream,
        Err(error) => {
            tracing::warn!(%holder, %error, "cannot reach the live view of the instance holding a session");
            let mut viewer = viewer;
            let _ = viewer
                .send(Message::Close(Some(CloseFrame {
                    code: 1011,
                    reason: "the instance holding this session does not answer".into(),
                })))
                .await;
            return;
        }
    };
    let (mut to_holder, mut from_holder) = upstream.split();
    let (mut to_viewer, mut from_viewer) = viewer.split();
    loop {
        tokio::select! {
            message = from_viewer.next() => {
                let message = match message {
                    Some(Ok(Message::Text(text))) => tungstenite::Message::text(text.as_str()),
                    Some(Ok(Message::Binary(bytes))) => tungstenite::Message::binary(bytes),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                };
                if to_holder.send(message).await.is_err() {
                    break;
                }
            }
            message = from_holder.next() => {
                let message = match message {
                    Some(Ok(tungstenite::Message::Text(text))) => Message::Text(text.as_str().into()),
                    Some(Ok(tungstenite::Message::Binary(bytes))) => Message::Binary(bytes),
                    Some(Ok(tungstenite::Message::Close(frame))) => {
                        let frame = frame.map(|frame| CloseFrame {
                            code: frame.code.into(),
                            reason: frame.reason.as_str().into(),
                        });
                        let _ = to_viewer.send(Message::Close(frame)).await;
                        break;
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => break,
                };
                if to_viewer.send(message).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to_holder.close().await;
}

type Upstream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the holder's live-view WebSocket as its own page would (its `Origin`).
async fn connect(holder: &str, session: &str, cap: &str) -> anyhow::Result<Upstream> {
    let base = url::Url::parse(holder)?;
    let mut url = base.clone();
    let scheme = if base.scheme() == "https" {
        "wss"
    } else {
        "ws"
    };
    url.set_scheme(scheme)
        .map_err(|()| anyhow::anyhow!("{holder} cannot carry a WebSocket"))?;
    url.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("{holder} is not a base URL"))?
        .pop_if_empty()
        .extend(["live", session, "ws"]);
    url.query_pairs_mut().clear().append_pair("cap", cap);
    let mut request = url.as_str().into_client_request()?;
    request.headers_mut().insert(
        axum::http::header::ORIGIN,
        base.origin().ascii_serialization().parse()?,
    );
    let (stream, _) = tokio_tungstenite::connect_async(request).await?;
    Ok(stream)
}
