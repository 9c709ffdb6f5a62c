//! Which URLs webpilot may reach: `http`/`https` only, and no private, loopback, link-local,
//! shared or metadata addresses unless the allow-list (`fetch.allow`) names them (SSRF defence).
//! One policy for both sides: browserless fetches and the documents the browser loads.
//!
//! Host names are judged by the addresses they resolve to: at connect time for fetches (see
//! `web::client::GuardedResolver`), so a name that later resolves to 127.0.0.1 is still
//! refused; when a document request is paused for the browser (`browser::guard`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::{Host, Url};

use crate::error::{ErrorCode, ToolError};

/// The longest URL the tools take. Chromium takes up to 2 MB, but sites answer far less (8 KB is
/// common); past this, a URL is a mistake or an attack, not an address.
pub const MAX_URL_BYTES: usize = 32 * 1024;

/// Refuses a URL longer than `MAX_URL_BYTES` as the caller's mistake (`field` names it), before
/// anything is fetched.
pub fn check_length(url: &str, field: &str) -> Result<(), ToolError> {
    if url.len() <= MAX_URL_BYTES {
        return Ok(());
    }
    Err(ToolError::invalid(format!(
        "field `{field}`: the URL is {} bytes long, more than {MAX_URL_BYTES}",
        url.len()
    ))
    .with_hint("pass a shorter URL: put large data in a POST body or a file instead"))
}

/// The allow-list, parsed once.
#[derive(Debug, Clone, Default)]
pub struct UrlPolicy {
    networks: Vec<IpNet>,
    hosts: Vec<String>,
}

impl UrlPolicy {
    /// Entries are IP addresses, CIDR networks (`10.0.0.0/8`) or host names.
    pub fn new(allow: &[String]) -> Result<Self, String> {
        let mut policy = Self::default();
        for entry in allow.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.networks.push(net);
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.networks.push(IpNet::from(ip));
            } else if entry.contains('/') || entry.contains(':') {
                return Err(format!(
                    "{entry:?} is neither an IP, a CIDR network nor a host"
                ));
            } else {
                policy.hosts.push(entry.to_ascii_lowercase());
            }
        }
        Ok(policy)
    }

    /// Checks scheme and, for IP-literal hosts, the address. Named hosts are checked when their
    /// addresses are known (`check_addr`).
    pub fn check_url(&self, url: &Url) -> Result<(), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(blocked(format!(
                "{url}: only http and https URLs can be fetched, not {}:",
                url.scheme()
            )));
        }
        match url.host() {
            None => Err(blocked(format!("{url} has no host"))),
            Some(Host::Ipv4(ip)) => self.check_addr(url.as_str(), None, IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.check_addr(url.as_str(), None, IpAddr::V6(ip)),
            Some(Host::Domain(_)) => Ok(()),
        }
    }

    /// Whether `host` (the name as written in the URL) may connect to `ip`.
    pub fn allows(&self, host: Option<&str>, ip: IpAddr) -> bool {
        is_public(ip)
            || self.networks.iter().any(|net| net.contains(&ip))
            || host.is_some_and(|h| {
                self.hosts
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(h))
            })
    }

    pub fn check_addr(&self, what: &str, host: Option<&str>, ip: IpAddr) -> Result<(), ToolError> {
        if self.allows(host, ip) {
            Ok(())
        } else {
            Err(blocked(format!(
                "{what} resolves to {ip}, a private, loopback, link-local or metadata address"
            ))
            .with_hint(
                "only public addresses can be reached; an operator can allow this target with \
                 fetch.allow (WEBPILOT_FETCH_ALLOW)",
            ))
        }
    }
}

fn blocked(message: String) -> ToolError {
    ToolError::new(ErrorCode::BlockedUrl, message)
        .with_hint("pass an http:// or https:// URL of a public site")
}

/// Whether `ip` is an ordinary public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier NAT, cloud metadata)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local, incl. fd00:ec2::254 metadata
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || (first == 0x0064 && ip.segments()[1] == 0xff9b)) // NAT64 can reach private IPv4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn private_and_metadata_addresses_are_not_public() {
        for addr in [
            "127.0.0.1",
            "127.0.0.2",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip(addr)), "{addr}");
        }
        for addr in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(ip(addr)), "{addr}");
        }
    }

    #[test]
    fn the_allow_list_opens_exactly_what_it_names() {
        let policy =
            UrlPolicy::new(&["127.0.0.1".into(), "10.0.0.0/8".into(), "intra".into()]).unwrap();
        assert!(policy.allows(None, ip("127.0.0.1")));
        assert!(!policy.allows(None, ip("127.0.0.2")));
        assert!(policy.allows(None, ip("10.9.9.9")));
        assert!(policy.allows(Some("INTRA"), ip("192.168.0.9")));
        assert!(!policy.allows(Some("other"), ip("192.168.0.9")));
        assert!(UrlPolicy::new(&["10.0.0.0/99".into()]).is_err());
    }

    #[test]
    fn overlong_urls_are_the_callers_mistake() {
        let long = format!("https://example.org/?q={}", "a".repeat(MAX_URL_BYTES));
        let error = check_length(&long, "url").unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgument);
        assert!(error.message.contains("field `url`"), "{}", error.message);
        assert!(check_length("https://example.org/", "url").is_ok());
    }

    #[test]
    fn only_http_schemes_pass() {
        let policy = UrlPolicy::default();
        for url in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "ftp://x.org/",
            "http://127.0.0.1/",
        ] {
            let error = policy.check_url(&Url::parse(url).unwrap()).unwrap_err();
            assert_eq!(error.code, ErrorCode::BlockedUrl, "{url}");
        }
        assert!(
            policy
                .check_url(&Url::parse("https://example.org/").unwrap())
                .is_ok()
        );
    }
}
