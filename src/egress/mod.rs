//! The egress policy proxy: every connection Chromium opens — documents, subresources,
//! `fetch`, WebSockets, workers, popups, frames of any site at any depth, `*.localhost` —
//! goes through webpilot, which resolves the host itself, checks every address against the
//! URL policy (`crate::policy`) and connects to an address it checked (no second resolution,
//! so DNS rebinding gains nothing). A refused connection fails at once, before anything is
//! sent to the address.
//!
//! The proxy speaks SOCKS5 (`socks`): one CONNECT per connection whatever the scheme, so a
//! refusal is a failed connection for Chromium (never a page the proxy would have to make up
//! for plain HTTP). HTTP is parsed only where an HTTP upstream proxy must see plain HTTP in
//! absolute form (`forward`). Each browser context gets its own *lane* (a
//! listener of its own), so what a lane refused belongs to that context's session, whichever
//! of its tabs, frames or workers asked.

mod forward;
mod resolve;
mod socks;
mod upstream;

use crate::sync::Locked;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub use resolve::{Resolver, Unreachable};
use socks::{Destination, Reply};
pub use upstream::Upstream;

use crate::error::ToolError;
use crate::policy::UrlPolicy;

/// How long a client may take to send its SOCKS request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one address of a host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Distinct refused destinations a lane keeps until they are taken (the count goes on).
const BLOCKED_KEPT: usize = 20;
/// How long a lane remembers why a destination could not be reached, for navigation errors.
const FAILURE_MEMORY: Duration = Duration::from_secs(60);
/// Destinations whose failure a lane remembers, at most.
const FAILURES_KEPT: usize = 256;
/// Tunnels one lane keeps open at once; past it, new connections wait to be accepted.
/// Chromium itself opens at most 256 sockets per profile.
const TUNNELS_PER_LANE: usize = 512;
/// How long a tunnel stays after one side closed, for the other to finish.
const HALF_CLOSED_GRACE: Duration = Duration::from_secs(30);
/// Chromium's proxy bypass rule that takes loopback out of its implicit bypass list.
pub const NO_BYPASS: &str = "<-loopback>";

/// The proxy's shared part: policy, resolver, the upstream proxy, counters.
pub struct Egress {
    resolver: Resolver,
    /// The proxy connections go through unless a lane has its own (`--proxy`).
    upstream: Option<Arc<Upstream>>,
    refused_total: AtomicU64,
}

/// A destination the policy refused, and how often since the lane's log was last taken.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Blocked {
    /// `host:port` as the page asked for it.
    pub target: String,
    /// Why the policy refused it.
    pub reason: String,
    /// Connections refused to it.
    pub count: u32,
}

/// Why a connection through a lane failed.
#[derive(Debug, Clone)]
pub enum Failure {
    Refused(ToolError),
    Unresolved,
    Connect(io::ErrorKind, String),
}

impl Failure {
    fn reply(&self) -> Reply {
        match self {
            Failure::Refused(_) => Reply::NotAllowed,
            Failure::Unresolved => Reply::HostUnreachable,
            Failure::Connect(io::ErrorKind::ConnectionRefused, _) => Reply::ConnectionRefused,
            Failure::Connect(..) => Reply::HostUnreachable,
        }
    }

    /// The error of a navigation that failed this way: `BLOCKED_URL` for a refusal, else
    /// Chromium's own name for the network error (Chromium itself only sees a failed proxy
    /// connection).
    pub fn navigation_error(&self, target: &str) -> Result<ToolError, String> {
        match self {
            Failure::Refused(error) => Ok(error.clone()),
            Failure::Unresolved => Err(format!(
                "net::ERR_NAME_NOT_RESOLVED ({target} does not resolve)"
            )),
            Failure::Connect(io::ErrorKind::ConnectionRefused, _) => Err(format!(
                "net::ERR_CONNECTION_REFUSED (nothing listens at {target})"
            )),
            Failure::Connect(io::ErrorKind::TimedOut, _) => Err(format!(
                "net::ERR_CONNECTION_TIMED_OUT (connecting to {target})"
            )),
            Failure::Connect(_, error) => Err(format!(
                "net::ERR_CONNECTION_FAILED (connecting to {target}: {error})"
            )),
        }
    }
}

impl Egress {
    pub fn new(policy: UrlPolicy) -> Arc<Self> {
        Self::through(policy, None)
    }

    /// An egress whose connections go through `upstream` (hosts on its bypass list go direct).
    pub fn through(policy: UrlPolicy, upstream: Option<Upstream>) -> Arc<Self> {
        Arc::new(Self {
            resolver: Resolver::new(policy),
            upstream: upstream.map(Arc::new),
            refused_total: AtomicU64::new(0),
        })
    }

    /// The policy with its address cache, for checks made before a request leaves.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// Connections refused by the policy since start, all lanes.
    pub fn refused_total(&self) -> u64 {
        self.refused_total.load(Ordering::Relaxed)
    }

    /// A new lane under the service's policy.
    pub async fn open_lane(self: &Arc<Self>) -> io::Result<Lane> {
        self.open_lane_under(self.resolver.policy().clone()).await
    }

    /// A new lane whose connections `policy` judges (a tenant's): its own listener on
    /// 127.0.0.1, served until the lane drops.
    pub async fn open_lane_under(self: &Arc<Self>, policy: Arc<UrlPolicy>) -> io::Result<Lane> {
        self.open_lane_through(policy, self.upstream.clone()).await
    }

    /// The lane of the browser itself, outside every session: what goes through it is
    /// Chromium's own background traffic (clock, updates, accounts), which no caller asked for
    /// and which reaches nothing. Its refusals are not counted as the pages'.
    pub async fn open_background_lane(self: &Arc<Self>) -> io::Result<Lane> {
        self.open(Arc::new(UrlPolicy::nothing()), None, true).await
    }

    /// `open_lane_under`, through `upstream` instead of the service's proxy (a session's own).
    pub async fn open_lane_through(
        self: &Arc<Self>,
        policy: Arc<UrlPolicy>,
        upstream: Option<Arc<Upstream>>,
    ) -> io::Result<Lane> {
        self.open(policy, upstream, false).await
    }

    async fn open(
        self: &Arc<Self>,
        policy: Arc<UrlPolicy>,
        upstream: Option<Arc<Upstream>>,
        background: bool,
    ) -> io::Result<Lane> {
        let listener = TcpListener::bind((IpAddr::from([127, 0, 0, 1]), 0)).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(LaneState {
            egress: self.clone(),
            policy,
            upstream,
            background,
            log: Mutex::new(LaneLog::default()),
        });
        let task = tokio::spawn(serve(listener, state.clone()));
        Ok(Lane {
            address,
            state,
            task,
        })
    }

    /// Connects to an address of `destination` that `policy` allows, through `upstream` unless
    /// it bypasses the destination.
    async fn connect(
        &self,
        policy: &UrlPolicy,
        destination: &Destination,
        upstream: Option<&Upstream>,
    ) -> Result<Outbound, Failure> {
        let checked = self.resolver.checked_under(policy, &destination.host).await;
        if let Some(proxy) = upstream.filter(|proxy| !proxy.bypasses(&destination.host)) {
            return match checked {
                // A name this machine cannot resolve is the proxy's to resolve.
                Ok(_) | Err(Unreachable::Unresolved) => {
                    if proxy.tunnels_at_once(destination.port) {
                        let stream = proxy.connect(&destination.host, destination.port).await?;
                        Ok(Outbound::Ready(stream))
                    } else {
                        Ok(Outbound::HttpProxy(proxy.open().await?))
                    }
                }
                Err(Unreachable::Refused(error)) => Err(Failure::Refused(error)),
            };
        }
        let ips = checked.map_err(|unreachable| match unreachable {
            Unreachable::Refused(error) => Failure::Refused(error),
            Unreachable::Unresolved => Failure::Unresolved,
        })?;
        let mut last = Failure::Unresolved;
        for ip in ips {
            let address = SocketAddr::new(ip, destination.port);
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Outbound::Ready(stream));
                }
                Ok(Err(error)) => last = Failure::Connect(error.kind(), error.to_string()),
                Err(_) => {
                    last = Failure::Connect(io::ErrorKind::TimedOut, "timed out".into());
                }
            }
        }
        Err(last)
    }
}

/// A connection on its way to a destination.
enum Outbound {
    /// Connected to it (directly or tunnelled): bytes go through as they are.
    Ready(TcpStream),
    /// Connected to an HTTP proxy that has not been asked anything yet: what the browser
    /// sends first decides between a tunnel and absolute-form requests.
    HttpProxy(TcpStream),
}

/// One browser context's way out: a listener, and what it refused.
pub struct Lane {
    address: SocketAddr,
    state: Arc<LaneState>,
    task: JoinHandle<()>,
}

/// What a lane's connections share.
struct LaneState {
    egress: Arc<Egress>,
    /// What the lane's connections may reach.
    policy: Arc<UrlPolicy>,
    /// The proxy its connections go through, if any.
    upstream: Option<Arc<Upstream>>,
    /// The browser's own lane (`open_background_lane`): refusals there are not counted.
    background: bool,
    log: Mutex<LaneLog>,
}

impl LaneState {
    fn failed(&self, destination: &Destination, failure: Failure) {
        if let Failure::Refused(error) = &failure {
            if self.background {
                tracing::debug!(target = %destination, "the browser's own connection refused");
                return;
            }
            self.egress.refused_total.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target = %destination, message = %error.message, "egress refused");
        }
        lock(&self.log).record(destination, failure);
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Lane {
    /// The proxy as Chromium's `--proxy-server` or a context's `proxyServer` names it.
    /// What the lane's connections may reach.
    pub fn policy(&self) -> &Arc<UrlPolicy> {
        &self.state.policy
    }

    pub fn proxy_server(&self) -> String {
        format!("socks5://{}", self.address)
    }

    /// What the policy refused since the last call, most frequent first; the log starts over.
    pub fn take_blocked(&self) -> Vec<Blocked> {
        let mut blocked = std::mem::take(&mut lock(&self.state.log).blocked);
        blocked.sort_by_key(|b| std::cmp::Reverse(b.count));
        blocked
    }

    /// Notes a request the policy refused before it reached the proxy (the document guard).
    pub fn refused(&self, host: &str, port: u16, error: &ToolError) {
        let destination = Destination {
            host: host.to_string(),
            port,
        };
        self.state
            .failed(&destination, Failure::Refused(error.clone()));
    }

    /// Why `host:port` could not be reached lately, if it could not.
    pub fn failure(&self, host: &str, port: u16) -> Option<Failure> {
        let key = format!("{}:{port}", host.to_ascii_lowercase());
        lock(&self.state.log)
            .failures
            .get(&key)
            .filter(|(at, _)| at.elapsed() < FAILURE_MEMORY)
            .map(|(_, failure)| failure.clone())
    }
}

/// What a lane saw go wrong.
#[derive(Default)]
struct LaneLog {
    blocked: Vec<Blocked>,
    failures: HashMap<String, (Instant, Failure)>,
}

impl LaneLog {
    fn record(&mut self, destination: &Destination, failure: Failure) {
        let target = destination.to_string();
        if let Failure::Refused(error) = &failure {
            if let Some(known) = self.blocked.iter_mut().find(|b| b.target == target) {
                known.count += 1;
            } else if self.blocked.len() < BLOCKED_KEPT {
                self.blocked.push(Blocked {
                    target: target.clone(),
                    reason: error.message.clone(),
                    count: 1,
                });
            }
        }
        if self.failures.len() >= FAILURES_KEPT {
            self.failures
                .retain(|_, (at, _)| at.elapsed() < FAILURE_MEMORY);
            if self.failures.len() >= FAILURES_KEPT {
                self.failures.clear();
            }
        }
        self.failures
            .insert(target.to_ascii_lowercase(), (Instant::now(), failure));
    }
}

fn lock(log: &Mutex<LaneLog>) -> std::sync::MutexGuard<'_, LaneLog> {
    log.locked()
}

async fn serve(listener: TcpListener, lane: Arc<LaneState>) {
    // Owned here: when the lane drops (its context closed), its tunnels end with it.
    let mut tunnels = tokio::task::JoinSet::new();
    loop {
        while tunnels.try_join_next().is_some() {}
        if tunnels.len() >= TUNNELS_PER_LANE {
            tunnels.join_next().await;
            continue;
        }
        match listener.accept().await {
            Ok((client, _)) => {
                tunnels.spawn(tunnel(client, lane.clone()));
            }
            Err(error) => {
                // Out of file descriptors, typically: wait instead of spinning.
                tracing::warn!(%error, "egress proxy cannot accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One proxied connection: the request, the policy, then bytes both ways until either side
/// closes.
async fn tunnel(mut client: TcpStream, lane: Arc<LaneState>) {
    let _ = client.set_nodelay(true);
    let request =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, socks::read_request(&mut client)).await {
            Ok(Ok(request)) => request,
            Ok(Err(error)) => {
                tracing::debug!(%error, "egress proxy: bad request");
                return;
            }
            Err(_) => return,
        };
    let destination = match request {
        Ok(destination) => destination,
        Err(reply) => {
            let _ = socks::reply(&mut client, reply).await;
            return;
        }
    };
    match lane
        .egress
        .connect(&lane.policy, &destination, lane.upstream.as_deref())
        .await
    {
        Ok(outbound) => {
            // An older failure to reach it no longer explains anything.
            lock(&lane.log)
                .failures
                .remove(&destination.to_string().to_ascii_lowercase());
            if socks::reply(&mut client, Reply::Succeeded).await.is_err() {
                return;
            }
            match (outbound, lane.upstream.as_deref()) {
                (Outbound::HttpProxy(proxy), Some(upstream)) => {
                    let failed = |failure| lane.failed(&destination, failure);
                    let (host, port) = (&destination.host, destination.port);
                    forward::serve(client, proxy, upstream, host, port, &failed).await;
                }
                (Outbound::Ready(stream) | Outbound::HttpProxy(stream), _) => {
                    relay(client, stream).await;
                }
            }
        }
        Err(failure) => {
            let reply = failure.reply();
            lane.failed(&destination, failure);
            let _ = socks::reply(&mut client, reply).await;
        }
    }
}

/// Copies bytes both ways. Once one side has closed, the other gets `HALF_CLOSED_GRACE` to
/// finish: a site that neither answers nor closes must not hold the tunnel for ever.
async fn relay(client: TcpStream, upstream: TcpStream) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let outward = async {
        let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
        let _ = upstream_write.shutdown().await;
    };
    let inward = async {
        let _ = copy_acknowledging(&mut upstream_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::pin!(outward, inward);
    tokio::select! {
        () = &mut outward => {
            let _ = tokio::time::timeout(HALF_CLOSED_GRACE, inward).await;
        }
        () = &mut inward => {
            let _ = tokio::time::timeout(HALF_CLOSED_GRACE, outward).await;
        }
    }
}

/// Copies what the site sends towards Chromium, acknowledging what arrives at once. A server
/// that writes a response's headers and its body in two writes without `TCP_NODELAY` (Python's
/// `http.server`, for one) holds the body until the headers are acknowledged; on a kept-alive
/// connection Linux delays that acknowledgement, and each response waited up to 40 ms (24 ms
/// more per navigation to such a server, measured). Quick-ACK mode does not last, so it is set
/// again before every read.
async fn copy_acknowledging(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
) -> io::Result<()> {
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0u8; RELAY_BUFFER];
    loop {
        acknowledge_at_once(from.as_ref());
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        to.write_all(&buffer[..read]).await?;
    }
}

/// Bytes moved per read from a site.
const RELAY_BUFFER: usize = 64 * 1024;

fn acknowledge_at_once(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: a socket option of a socket this process holds open, with a c_int value of
        // the size given.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Asks `lane` for `host:port` as Chromium would and returns the reply code.
    async fn connect_through(lane: &Lane, host: &str, port: u16) -> (u8, TcpStream) {
        let mut stream = TcpStream::connect(lane.address).await.unwrap();
        let mut request = vec![5, 1, 0, 5, 1, 0, 3, host.len() as u8];
        request.extend_from_slice(host.as_bytes());
        request.extend_from_slice(&port.to_be_bytes());
        stream.write_all(&request).await.unwrap();
        let mut answer = [0; 12];
        stream.read_exact(&mut answer).await.unwrap();
        (answer[3], stream)
    }

    #[tokio::test]
    async fn allowed_hosts_are_tunnelled_and_refused_ones_logged() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut socket, _) = upstream.accept().await.unwrap();
            socket.write_all(b"hello").await.unwrap();
        });
        let egress = Egress::new(UrlPolicy::new(&["127.0.0.1".into()]).unwrap());
        let lane = egress.open_lane().await.unwrap();
        let (code, mut stream) = connect_through(&lane, "127.0.0.1", port).await;
        assert_eq!(code, 0);
        let mut greeting = [0; 5];
        stream.read_exact(&mut greeting).await.unwrap();
        assert_eq!(&greeting, b"hello");

        for _ in 0..2 {
            let (code, _) = connect_through(&lane, "169.254.169.254", 80).await;
            assert_eq!(code, Reply::NotAllowed as u8);
        }
        let (code, _) = connect_through(&lane, "x.localhost", port).await;
        assert_eq!(code, Reply::NotAllowed as u8);
        let (code, _) = connect_through(&lane, "no-such-host.invalid", 80).await;
        assert_eq!(code, Reply::HostUnreachable as u8);
        let blocked = lane.take_blocked();
        assert_eq!(blocked.len(), 2, "{blocked:?}");
        assert_eq!(blocked[0].target, "169.254.169.254:80");
        assert_eq!(blocked[0].count, 2);
        assert!(lane.take_blocked().is_empty());
        assert!(matches!(
            lane.failure("no-such-host.invalid", 80),
            Some(Failure::Unresolved)
        ));
        assert_eq!(egress.refused_total(), 3);
    }
}
