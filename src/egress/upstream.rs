//! An upstream proxy (`--proxy`, or a session's own): the egress reaches its targets through it
//! with credentials, except hosts on the bypass list: SOCKS5, or for an HTTP proxy a `CONNECT`
//! tunnel for TLS and absolute-form requests for plain HTTP (`super::forward`). The URL
//! policy still judges every target first (a proxy is no way around it); a name this machine
//! cannot resolve is left to the proxy, which may resolve names the host cannot. The proxy's own
//! address is allowed implicitly. Credentials never appear in logs or errors: `Display` and
//! `Debug` leave them out.

use std::fmt;
use std::io;
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Failure;

/// How long connecting to the proxy, or its handshake, may take.
const PROXY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest response head a `CONNECT` may answer with.
const MAX_HEAD: usize = 8 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http,
    Socks5,
}

/// A proxy to connect through, and the hosts that go direct.
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    kind: Kind,
    host: String,
    port: u16,
    credentials: Option<(String, String)>,
    bypass: Vec<String>,
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.kind {
            Kind::Http => "http",
            Kind::Socks5 => "socks5",
        };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Upstream({self})")
    }
}

impl Upstream {
    /// `http://user:pass@host:port` or `socks5://…`; `bypass` lists hosts that go direct
    /// (`example.com`, `*.example.com` or `.example.com` for subdomains).
    pub fn parse(proxy: &str, bypass: &[String]) -> Result<Self, String> {
        let url = url::Url::parse(proxy.trim())
            .map_err(|e| format!("the proxy {:?} is not a URL: {e}", redact(proxy)))?;
        let kind = match url.scheme() {
            "http" => Kind::Http,
            "socks5" | "socks5h" => Kind::Socks5,
            other => {
                return Err(format!(
                    "proxy scheme {other:?} is not supported (http:// or socks5://)"
                ));
            }
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("the proxy URL names no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port().unwrap_or(match kind {
            Kind::Http => 80,
            Kind::Socks5 => 1080,
        });
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let credentials = (!url.username().is_empty())
            .then(|| (decode(url.username()), decode(url.password().unwrap_or(""))));
        let bypass = bypass
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        Ok(Self {
            kind,
            host,
            port,
            credentials,
            bypass,
        })
    }

    /// The service's proxy (`proxy`, `proxy_bypass`), if one is configured.
    pub fn configured(config: &crate::config::Config) -> Result<Option<Self>, String> {
        config
            .proxy
            .as_deref()
            .filter(|proxy| !proxy.trim().is_empty())
            .map(|proxy| Self::parse(proxy, &config.proxy_bypass))
            .transpose()
            .map_err(|e| format!("--proxy: {e}"))
    }

    /// The proxy as an URL without credentials, for clients that take them apart.
    pub fn address(&self) -> String {
        self.to_string()
    }

    /// The proxy's host name or address.
    pub fn host(&self) -> String {
        self.host.clone()
    }

    /// `(user, password)`, if the proxy wants them.
    pub fn credentials(&self) -> Option<&(String, String)> {
        self.credentials.as_ref()
    }

    /// The bypass list as given.
    pub fn bypass_list(&self) -> &[String] {
        &self.bypass
    }

    /// Whether `host` goes direct.
    pub fn bypasses(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.bypass.iter().any(|entry| {
            if let Some(domain) = entry.strip_prefix("*.") {
                host.ends_with(&format!(".{domain}"))
            } else if entry.starts_with('.') {
                host.ends_with(entry.as_str())
            } else {
                host == *entry
            }
        })
    }

    /// A connection to `host:port` through the proxy, handshake done.
    pub(super) async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, Failure> {
        let mut stream = self.open().await?;
        self.handshake(&mut stream, host, port).await?;
        Ok(stream)
    }

    /// Asks the proxy, on `stream`, for a connection to `host:port`, within `PROXY_TIMEOUT`.
    pub(super) async fn handshake(
        &self,
        stream: &mut TcpStream,
        host: &str,
        port: u16,
    ) -> Result<(), Failure> {
        let handshake = async {
            match self.kind {
                Kind::Http => self.http_connect(stream, host, port).await,
                Kind::Socks5 => self.socks_connect(stream, host, port).await,
            }
        };
        tokio::time::timeout(PROXY_TIMEOUT, handshake)
            .await
            .map_err(|_| {
                self.failed(io::ErrorKind::TimedOut, "no answer to the handshake".into())
            })?
    }

    /// Whether a connection to `port` is tunnelled before the browser says anything: always
    /// through SOCKS5, and to 443 through an HTTP proxy. Other ports through an HTTP proxy are
    /// decided by what the browser sends first (`forward`): proxies commonly allow `CONNECT`
    /// only to 443, and plain HTTP goes to them as absolute-form requests.
    pub(super) fn tunnels_at_once(&self, port: u16) -> bool {
        self.kind == Kind::Socks5 || port == 443
    }

    /// A connection to the proxy itself, nothing sent yet.
    pub(super) async fn open(&self) -> Result<TcpStream, Failure> {
        let connecting = TcpStream::connect((self.host.as_str(), self.port));
        let stream = tokio::time::timeout(PROXY_TIMEOUT, connecting)
            .await
            .map_err(|_| self.failed(io::ErrorKind::TimedOut, "connecting timed out".into()))?
            .map_err(|e| self.failed(e.kind(), format!("cannot connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// The `Proxy-Authorization` value for the proxy's credentials, if it has any.
    pub(super) fn authorization(&self) -> Option<String> {
        self.credentials.as_ref().map(|(user, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        })
    }

    fn failed(&self, kind: io::ErrorKind, why: String) -> Failure {
        Failure::Connect(kind, format!("through the proxy {self}: {why}"))
    }

    /// Asks the HTTP proxy for a tunnel to `host:port`.
    async fn http_connect(
        &self,
        stream: &mut TcpStream,
        host: &str,
        port: u16,
    ) -> Result<(), Failure> {
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(authorization) = self.authorization() {
            request.push_str(&format!("Proxy-Authorization: {authorization}\r\n"));
        }
        request.push_str("\r\n");
        let io = |e: io::Error| self.failed(e.kind(), e.to_string());
        stream.write_all(request.as_bytes()).await.map_err(io)?;
        // Byte by byte: nothing after the head may be taken from the tunnel.
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() >= MAX_HEAD {
                return Err(self.failed(io::ErrorKind::InvalidData, "an endless answer".into()));
            }
            head.push(stream.read_u8().await.map_err(io)?);
        }
        let status = String::from_utf8_lossy(&head)
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse::<u16>().ok())
            .unwrap_or(0);
        match status {
            200..=299 => Ok(()),
            407 => Err(self.failed(
                io::ErrorKind::PermissionDenied,
                "the proxy wants other credentials (407)".into(),
            )),
            code => Err(self.failed(
                io::ErrorKind::ConnectionRefused,
                format!("the proxy answered {code} to CONNECT {target}"),
            )),
        }
    }

    async fn socks_connect(
        &self,
        stream: &mut TcpStream,
        host: &str,
        port: u16,
    ) -> Result<(), Failure> {
        let io = |e: io::Error| self.failed(e.kind(), e.to_string());
        let method = if self.credentials.is_some() { 2 } else { 0 };
        stream.write_all(&[5, 1, method]).await.map_err(io)?;
        let mut chosen = [0u8; 2];
        stream.read_exact(&mut chosen).await.map_err(io)?;
        if chosen != [5, method] {
            return Err(self.failed(
                io::ErrorKind::PermissionDenied,
                "the proxy refused the authentication method".into(),
            ));
        }
        if let Some((user, password)) = &self.credentials {
            let (user, password) = (user.as_bytes(), password.as_bytes());
            if user.len() > 255 || password.len() > 255 {
                return Err(self.failed(io::ErrorKind::InvalidInput, "credentials too long".into()));
            }
            let mut login = vec![1, user.len() as u8];
            login.extend_from_slice(user);
            login.push(password.len() as u8);
            login.extend_from_slice(password);
            stream.write_all(&login).await.map_err(io)?;
            let mut answer = [0u8; 2];
            stream.read_exact(&mut answer).await.map_err(io)?;
            if answer[1] != 0 {
                return Err(self.failed(
                    io::ErrorKind::PermissionDenied,
                    "the proxy refused the credentials".into(),
                ));
            }
        }
        let Some(request) = socks_connect_request(host, port) else {
            return Err(self.failed(io::ErrorKind::InvalidInput, "host name too long".into()));
        };
        stream.write_all(&request).await.map_err(io)?;
        let mut reply = [0u8; 4];
        stream.read_exact(&mut reply).await.map_err(io)?;
        let bound = match reply[3] {
            1 => 4,
            4 => 16,
            3 => usize::from(stream.read_u8().await.map_err(io)?),
            _ => return Err(self.failed(io::ErrorKind::InvalidData, "a malformed reply".into())),
        };
        let mut rest = vec![0u8; bound + 2];
        stream.read_exact(&mut rest).await.map_err(io)?;
        match reply[1] {
            0 => Ok(()),
            5 => Err(self.failed(
                io::ErrorKind::ConnectionRefused,
                "the target refused".into(),
            )),
            code => Err(self.failed(
                io::ErrorKind::ConnectionRefused,
                format!("the proxy could not connect (SOCKS reply {code})"),
            )),
        }
    }
}

/// A SOCKS5 CONNECT request for `host:port` (an address, or a name of at most 255 bytes).
fn socks_connect_request(host: &str, port: u16) -> Option<Vec<u8>> {
    let mut request = vec![5, 1, 0];
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            let name = host.as_bytes();
            request.push(3);
            request.push(u8::try_from(name.len()).ok()?);
            request.extend_from_slice(name);
        }
    }
    request.extend_from_slice(&port.to_be_bytes());
    Some(request)
}

/// A proxy URL with its password replaced, for messages.
fn redact(proxy: &str) -> String {
    match url::Url::parse(proxy) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("***"));
            url.to_string()
        }
        _ => proxy.split('@').next_back().unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A SOCKS5 proxy that wants `user`/`pass`, connects where it is asked and says what that
    /// was (`host:port`) on its first line to the client, then echoes.
    async fn socks_server() -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut asked = Vec::new();
            for _ in 0..2 {
                let (mut client, _) = listener.accept().await.unwrap();
                let mut greeting = [0u8; 3];
                client.read_exact(&mut greeting).await.unwrap();
                client.write_all(&[5, 2]).await.unwrap();
                let mut login = [0u8; 2];
                client.read_exact(&mut login).await.unwrap();
                let mut user = vec![0u8; usize::from(login[1])];
                client.read_exact(&mut user).await.unwrap();
                let mut password = vec![0u8; usize::from(client.read_u8().await.unwrap())];
                client.read_exact(&mut password).await.unwrap();
                let good = user == b"user" && password == b"pass";
                client
                    .write_all(&[1, if good { 0 } else { 1 }])
                    .await
                    .unwrap();
                if !good {
                    asked.push("refused".to_string());
                    continue;
                }
                let mut request = [0u8; 5];
                client.read_exact(&mut request).await.unwrap();
                let mut name = vec![0u8; usize::from(request[4])];
                client.read_exact(&mut name).await.unwrap();
                let port = client.read_u16().await.unwrap();
                asked.push(format!("{}:{port}", String::from_utf8_lossy(&name)));
                client
                    .write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0])
                    .await
                    .unwrap();
                let mut ping = [0u8; 4];
                client.read_exact(&mut ping).await.unwrap();
                client.write_all(&ping).await.unwrap();
            }
            asked
        });
        (port, task)
    }

    #[tokio::test]
    async fn socks5_upstreams_get_credentials_and_the_name_to_resolve() {
        let (port, server) = socks_server().await;
        let good = Upstream::parse(&format!("socks5://user:pass@127.0.0.1:{port}"), &[]).unwrap();
        let mut stream = good.connect("wiki.corp.invalid", 8080).await.unwrap();
        stream.write_all(b"ping").await.unwrap();
        let mut echo = [0u8; 4];
        stream.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"ping");
        let bad = Upstream::parse(&format!("socks5://user:wrong@127.0.0.1:{port}"), &[]).unwrap();
        let Err(Failure::Connect(kind, why)) = bad.connect("example.com", 443).await else {
            panic!("wrong credentials were accepted");
        };
        assert_eq!(kind, io::ErrorKind::PermissionDenied);
        assert!(!why.contains("wrong"), "{why}");
        assert_eq!(
            server.await.unwrap(),
            vec!["wiki.corp.invalid:8080".to_string(), "refused".to_string()]
        );
    }

    #[test]
    fn proxies_parse_with_credentials_and_never_show_them() {
        let proxy = Upstream::parse(
            "http://al%40ce:s3cret@proxy.corp:3128",
            &["*.intra".into(), "Direct.example".into()],
        )
        .unwrap();
        assert_eq!(proxy.to_string(), "http://proxy.corp:3128");
        assert_eq!(format!("{proxy:?}"), "Upstream(http://proxy.corp:3128)");
        assert_eq!(
            proxy.credentials(),
            Some(&("al@ce".to_string(), "s3cret".to_string()))
        );
        assert!(proxy.bypasses("wiki.intra"));
        assert!(!proxy.bypasses("intra"));
        assert!(proxy.bypasses("direct.example"));
        assert!(!proxy.bypasses("example.com"));
        let socks = Upstream::parse("socks5://10.0.0.1", &[]).unwrap();
        assert_eq!(socks.to_string(), "socks5://10.0.0.1:1080");
        let error = Upstream::parse("ftp://u:topsecret@x", &[]).unwrap_err();
        assert!(!error.contains("topsecret"), "{error}");
        let error = Upstream::parse("not a url:topsecret@", &[]).unwrap_err();
        assert!(!error.contains("topsecret"), "{error}");
    }
}
