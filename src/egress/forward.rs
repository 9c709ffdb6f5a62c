//! Plain HTTP through an HTTP upstream proxy, the way Chromium and curl use one: each request
//! goes to the proxy in absolute form (`GET http://site/path HTTP/1.1`) with the proxy's
//! credentials, instead of a `CONNECT` tunnel. Most proxies allow `CONNECT` only to port 443
//! (squid's default `http_access deny CONNECT !SSL_ports`), and some forward absolute-form
//! requests only. A connection that starts with a TLS handshake still gets a tunnel.
//!
//! Only request heads are rewritten; bodies and everything the proxy answers pass through as
//! bytes. A request whose body length cannot be known from its head (chunked) ends the
//! rewriting: it asks for `Connection: close`, so the browser opens a new connection for its
//! next request.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::Failure;
use super::upstream::Upstream;

/// Longest request head the browser may send (Chromium's own limit is lower).
const MAX_HEAD: usize = 256 * 1024;
/// Headers a request may carry.
const MAX_HEADERS: usize = 128;
/// The first byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE: u8 = 0x16;

/// What a proxy's answer said about the connection, for navigation errors.
pub(super) type OnFailure<'a> = &'a (dyn Fn(Failure) + Send + Sync);

/// Serves one browser connection to `host:port` through the HTTP proxy at `proxy` (connected,
/// nothing sent yet): a tunnel if the browser starts TLS, absolute-form requests otherwise.
pub(super) async fn serve(
    client: TcpStream,
    mut proxy: TcpStream,
    upstream: &Upstream,
    host: &str,
    port: u16,
    on_failure: OnFailure<'_>,
) {
    let mut first = [0u8; 1];
    if !matches!(client.peek(&mut first).await, Ok(1)) {
        return;
    }
    if first[0] == TLS_HANDSHAKE {
        match upstream.handshake(&mut proxy, host, port).await {
            Ok(()) => super::relay(client, proxy).await,
            Err(failure) => on_failure(failure),
        }
        return;
    }
    let authority = authority(host, port);
    let (client_read, mut client_write) = client.into_split();
    let (proxy_read, mut proxy_write) = proxy.into_split();
    let credentials = upstream.authorization();
    let outward = async {
        let mut reader = BufReader::new(client_read);
        let result = forward_requests(
            &mut reader,
            &mut proxy_write,
            &authority,
            credentials.as_deref(),
        )
        .await;
        if let Err(error) = result {
            tracing::debug!(%error, "egress: forwarding to the proxy ended");
        }
        let _ = proxy_write.shutdown().await;
    };
    let inward = async {
        let _ = relay_answers(proxy_read, &mut client_write, upstream, on_failure).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(outward, inward);
}

/// `host[:port]` as a URL names it (the default port left out, IPv6 in brackets).
fn authority(host: &str, port: u16) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    if port == 80 {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// Rewrites each request head the browser sends into absolute form, passing bodies through,
/// until the browser closes or a request's body has no length in its head.
async fn forward_requests<R, W>(
    reader: &mut BufReader<R>,
    proxy: &mut W,
    authority: &str,
    credentials: Option<&str>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let Some(head) = read_head(reader).await? else {
            return Ok(());
        };
        let request = Rewritten::of(&head, authority, credentials)?;
        proxy.write_all(&request.head).await?;
        match request.body {
            Body::Length(length) => {
                let copied = tokio::io::copy(&mut (&mut *reader).take(length), &mut *proxy).await?;
                if copied < length {
                    return Ok(());
                }
            }
            Body::Rest => {
                tokio::io::copy(reader, proxy).await?;
                return Ok(());
            }
        }
    }
}

/// One request head, up to and including its blank line; None when the browser closed.
async fn read_head<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let read = reader.read_until(b'\n', &mut head).await?;
        if read == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a cut request head",
                ))
            };
        }
        if head == b"\r\n" {
            // A stray line break between requests.
            head.clear();
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an endless request head",
            ));
        }
    }
    Ok(Some(head))
}

/// How much of what follows a head is its body.
#[derive(Debug, PartialEq)]
enum Body {
    /// Exactly this many bytes (0 without a body).
    Length(u64),
    /// Everything that follows: a chunked body, or a protocol switch.
    Rest,
}

/// A request head as the proxy must see it.
#[derive(Debug)]
struct Rewritten {
    head: Vec<u8>,
    body: Body,
}

impl Rewritten {
    fn of(head: &[u8], authority: &str, credentials: Option<&str>) -> io::Result<Self> {
        let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err(invalid("not an HTTP/1 request")),
        }
        let (Some(method), Some(path), Some(version)) =
            (request.method, request.path, request.version)
        else {
            return Err(invalid("an incomplete request line"));
        };
        let target = if path.starts_with('/') {
            format!("http://{authority}{path}")
        } else {
            path.to_string()
        };
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
        };
        let chunked = header("transfer-encoding").is_some_and(|te| te.contains("chunked"));
        let upgrade = header("upgrade").is_some();
        let length = header("content-length")
            .map(|value| value.trim().parse::<u64>())
            .transpose()
            .map_err(|_| invalid("a malformed Content-Length"))?;
        let body = if chunked || upgrade {
            Body::Rest
        } else {
            Body::Length(length.unwrap_or(0))
        };
        let mut out = format!("{method} {target} HTTP/1.{version}\r\n").into_bytes();
        for h in request.headers.iter() {
            let dropped = ["proxy-authorization", "proxy-connection"]
                .iter()
                .any(|name| h.name.eq_ignore_ascii_case(name))
                || (chunked && h.name.eq_ignore_ascii_case("connection"));
            if !dropped {
                out.extend_from_slice(h.name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(h.value);
                out.extend_from_slice(b"\r\n");
            }
        }
        if chunked {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        if let Some(credentials) = credentials {
            out.extend_from_slice(format!("Proxy-Authorization: {credentials}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        Ok(Self { head: out, body })
    }
}

/// Passes the proxy's answers to the browser. A first answer refusing the credentials (407)
/// is the proxy's, not the site's: it is noted, so the failed navigation says why, and the
/// connection ends without it.
async fn relay_answers<R, W>(
    mut proxy: R,
    client: &mut W,
    upstream: &Upstream,
    on_failure: OnFailure<'_>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut first = vec![0u8; 16 * 1024];
    let read = proxy.read(&mut first).await?;
    if read == 0 {
        return Ok(());
    }
    if wants_credentials(&first[..read]) {
        on_failure(Failure::Connect(
            io::ErrorKind::PermissionDenied,
            format!("through the proxy {upstream}: the proxy wants other credentials (407)"),
        ));
        return Ok(());
    }
    client.write_all(&first[..read]).await?;
    tokio::io::copy(&mut proxy, client).await?;
    Ok(())
}

/// Whether an answer starts with `407 Proxy Authentication Required`.
fn wants_credentials(answer: &[u8]) -> bool {
    let line = answer.split(|b| *b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(line).split_whitespace().nth(1) == Some("407")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(head: &str) -> (String, Body) {
        let rewritten =
            Rewritten::of(head.as_bytes(), "site.test:8080", Some("Basic eA==")).unwrap();
        (String::from_utf8(rewritten.head).unwrap(), rewritten.body)
    }

    #[test]
    fn requests_go_in_absolute_form_with_the_proxys_credentials() {
        let (head, body) = rewrite(
            "GET /a?b=1 HTTP/1.1\r\nHost: site.test:8080\r\nProxy-Authorization: Basic forged\r\n\r\n",
        );
        assert_eq!(
            head,
            "GET http://site.test:8080/a?b=1 HTTP/1.1\r\nHost: site.test:8080\r\n\
             Proxy-Authorization: Basic eA==\r\n\r\n"
        );
        assert_eq!(body, Body::Length(0));
        let (head, body) = rewrite(
            "POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n",
        );
        assert!(
            head.starts_with("POST http://site.test:8080/form HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("Connection: keep-alive"), "{head}");
        assert_eq!(body, Body::Length(12));
    }

    #[test]
    fn chunked_bodies_end_the_connection_after_them() {
        let (head, body) = rewrite(
            "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
        );
        assert_eq!(body, Body::Rest);
        assert!(head.contains("Connection: close\r\n"), "{head}");
        assert!(!head.contains("keep-alive"), "{head}");
        assert!(Rewritten::of(b"\x16\x03\x01garbage\r\n\r\n", "x", None).is_err());
    }

    #[test]
    fn only_a_407_is_the_proxys_refusal() {
        assert!(wants_credentials(
            b"HTTP/1.1 407 Proxy Authentication Required\r\n"
        ));
        assert!(!wants_credentials(b"HTTP/1.1 403 Forbidden\r\n"));
        assert!(!wants_credentials(b"HTTP/1.1 200 OK\r\nX: 407\r\n"));
    }

    #[tokio::test]
    async fn keep_alive_requests_are_each_rewritten() {
        let browser = b"GET /one HTTP/1.1\r\nHost: h\r\n\r\nPOST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /three HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut reader = BufReader::new(&browser[..]);
        let mut sent = Vec::new();
        forward_requests(&mut reader, &mut sent, "h", None)
            .await
            .unwrap();
        let sent = String::from_utf8(sent).unwrap();
        assert_eq!(
            sent,
            "GET http://h/one HTTP/1.1\r\nHost: h\r\n\r\n\
             POST http://h/two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\
             GET http://h/three HTTP/1.1\r\nHost: h\r\n\r\n"
        );
    }

    #[test]
    fn authorities_leave_out_the_default_port() {
        assert_eq!(authority("site.test", 80), "site.test");
        assert_eq!(authority("site.test", 8080), "site.test:8080");
        assert_eq!(authority("::1", 8080), "[::1]:8080");
    }
}
