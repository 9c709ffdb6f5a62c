//! Host names to addresses, once per minute per host, judged by the URL policy.
//!
//! `localhost`, `*.localhost` and their trailing-dot forms are loopback without asking DNS, as
//! Chromium treats them (RFC 6761): judging them by a DNS answer that does not exist would let
//! them through.

use crate::sync::Locked;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::ToolError;
use crate::policy::UrlPolicy;

/// How long a host's addresses are reused. Connections go to the addresses that were checked,
/// so the cache saves a DNS round trip per connection and changes nothing the policy sees.
const ADDRESSES_TTL: Duration = Duration::from_secs(60);
/// A name whose lookup takes longer is treated as not resolving.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Beyond this many cached hosts the cache starts over.
const ADDRESSES_KEPT: usize = 1024;

/// Addresses of recently resolved hosts, by lower-cased name, with when they were found.
type AddressCache = HashMap<String, (Instant, Vec<IpAddr>)>;

/// Why a host cannot be reached.
#[derive(Debug, Clone)]
pub enum Unreachable {
    /// The policy refuses one of its addresses.
    Refused(ToolError),
    /// The name has no address.
    Unresolved,
}

/// The service's URL policy with the addresses of recently resolved hosts; a tenant's narrower
/// policy is judged with the same addresses (`checked_under`).
pub struct Resolver {
    policy: Arc<UrlPolicy>,
    addresses: Mutex<AddressCache>,
}

impl Resolver {
    pub fn new(policy: UrlPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
            addresses: Mutex::new(HashMap::new()),
        }
    }

    /// The service's policy.
    pub fn policy(&self) -> &Arc<UrlPolicy> {
        &self.policy
    }

    /// `checked` under the service's policy.
    pub async fn checked(&self, host: &str) -> Result<Vec<IpAddr>, Unreachable> {
        self.checked_under(&self.policy, host).await
    }

    /// The addresses of `host` (a name or an IP literal, IPv6 with or without brackets), every
    /// one of them allowed by the policy — any of them might be the one connected to, so one
    /// refused address refuses the host. Loopback comes first for local names, IPv4 first.
    pub async fn checked_under(
        &self,
        policy: &UrlPolicy,
        host: &str,
    ) -> Result<Vec<IpAddr>, Unreachable> {
        policy.check_host(host).map_err(Unreachable::Refused)?;
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let ips = match name.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self.resolve(name).await,
        };
        if ips.is_empty() {
            return Err(Unreachable::Unresolved);
        }
        // Allowed names match as written: `localhost.` is not what an allowed `localhost` names.
        let named = name.parse::<IpAddr>().is_err().then_some(name);
        for ip in &ips {
            policy
                .check_addr(host, named, *ip)
                .map_err(Unreachable::Refused)?;
        }
        Ok(ips)
    }

    /// The name's addresses; none when it does not resolve.
    async fn resolve(&self, name: &str) -> Vec<IpAddr> {
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        if is_loopback_name(&key) {
            return vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ];
        }
        if let Some((at, ips)) = self.cached().get(&key)
            && at.elapsed() < ADDRESSES_TTL
        {
            return ips.clone();
        }
        let lookup = tokio::net::lookup_host((key.as_str(), 0));
        let Ok(Ok(found)) = tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await else {
            return Vec::new();
        };
        let mut ips: Vec<IpAddr> = Vec::new();
        for ip in found.map(|address| address.ip()) {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        ips.sort_by_key(IpAddr::is_ipv6);
        let mut cached = self.cached();
        if cached.len() >= ADDRESSES_KEPT {
            cached.clear();
        }
        cached.insert(key, (Instant::now(), ips.clone()));
        ips
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, AddressCache> {
        self.addresses.locked()
    }
}

/// `localhost` and its subdomains (already lower-cased, without the trailing dot).
fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn refused(outcome: Result<Vec<IpAddr>, Unreachable>) -> ToolError {
        match outcome {
            Err(Unreachable::Refused(error)) => error,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn local_names_are_loopback_whatever_dns_says() {
        let strict = Resolver::new(UrlPolicy::default());
        for host in ["localhost", "x.localhost", "localhost.", "A.B.LOCALHOST."] {
            for _ in 0..2 {
                let error = refused(strict.checked(host).await);
                assert_eq!(error.code, ErrorCode::BlockedUrl, "{host}");
                assert!(error.message.contains(host), "{}", error.message);
            }
        }
        let only_v4 = Resolver::new(UrlPolicy::new(&["127.0.0.1".into()]).unwrap());
        // ::1 stays refused: a local name may reach either.
        refused(only_v4.checked("x.localhost").await);
        let by_name = Resolver::new(UrlPolicy::new(&["localhost".into()]).unwrap());
        let ips = by_name.checked("localhost").await.unwrap();
        assert_eq!(ips[0], IpAddr::V4(Ipv4Addr::LOCALHOST));
        refused(by_name.checked("other.localhost").await);
        refused(by_name.checked("localhost.").await);
    }

    #[tokio::test]
    async fn literals_are_checked_and_unknown_names_are_unresolved() {
        let resolver = Resolver::new(UrlPolicy::new(&["127.0.0.1".into()]).unwrap());
        assert!(resolver.checked("127.0.0.1").await.is_ok());
        refused(resolver.checked("127.0.0.2").await);
        refused(resolver.checked("[::1]").await);
        refused(resolver.checked("169.254.169.254").await);
        assert!(matches!(
            resolver.checked("no-such-host.invalid").await,
            Err(Unreachable::Unresolved)
        ));
    }
}
