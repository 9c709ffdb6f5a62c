//! Which URLs webpilot may reach: `http`/`https` only, no private, loopback, link-local, shared
//! or metadata addresses unless the allow-list (`fetch.allow`) names them (SSRF defence), and
//! only hosts the domain rules let through (`fetch.allow_domains`, `fetch.deny_domains`). One
//! policy for every side: browserless fetches, the documents the browser loads and every
//! connection of the browser (`crate::egress`).
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

/// The allow-list and the domain rules, parsed once.
#[derive(Debug, Clone, Default)]
pub struct UrlPolicy {
    networks: Vec<IpNet>,
    hosts: Vec<String>,
    /// The operator's domain rules, then those of the tenant the policy is for: a host must
    /// pass every layer, so a tenant's rules narrow the operator's and never widen them.
    domains: Vec<DomainRules>,
}

/// One owner's domain rules.
#[derive(Debug, Clone)]
struct DomainRules {
    /// Where they are written, for messages: `fetch.` or `the keys file's tenant "alice": `.
    owner: String,
    /// When not empty, the only hosts that may be reached.
    allow: Vec<DomainRule>,
    /// Hosts never reached; they win over `allow`.
    deny: Vec<DomainRule>,
}

impl DomainRules {
    fn parse(owner: String, allow: &[String], deny: &[String]) -> Result<Self, String> {
        Ok(Self {
            allow: domain_rules(allow).map_err(|e| format!("allow_domains: {e}"))?,
            deny: domain_rules(deny).map_err(|e| format!("deny_domains: {e}"))?,
            owner,
        })
    }

    /// Why `name` (lower-cased, bare) is refused, if it is; `host` as written for the message.
    fn refusal(&self, host: &str, name: &str) -> Option<String> {
        let owner = &self.owner;
        if let Some(rule) = self.deny.iter().find(|r| r.matches(name)) {
            return Some(format!(
                "{host} is refused by {:?} in {owner}deny_domains",
                rule.written
            ));
        }
        (!self.allow.is_empty() && !self.allow.iter().any(|r| r.matches(name)))
            .then(|| format!("{host} is not in {owner}allow_domains"))
    }
}

/// An exact host (`example.com`, `127.0.0.1`) or all subdomains of one (`*.example.com`, which
/// does not match `example.com` itself).
#[derive(Debug, Clone, PartialEq)]
struct DomainRule {
    /// As the operator wrote it, for messages.
    written: String,
    /// The host, lower-cased, in ASCII (IDNA) form, IPv6 without brackets.
    host: String,
    wildcard: bool,
}

impl DomainRule {
    fn parse(entry: &str) -> Result<Self, String> {
        let written = entry.trim().to_string();
        let (wildcard, name) = match written.strip_prefix("*.") {
            Some(name) => (true, name),
            None => (false, written.as_str()),
        };
        let host = match Host::parse(name.trim_end_matches('.')) {
            Ok(Host::Domain(domain)) if !domain.contains('*') => domain,
            Ok(Host::Ipv4(ip)) if !wildcard => ip.to_string(),
            Ok(Host::Ipv6(ip)) if !wildcard => ip.to_string(),
            _ => return Err(format!("{written:?} is neither a host nor *.domain")),
        };
        Ok(Self {
            written,
            host,
            wildcard,
        })
    }

    /// `host`: lower-cased, without a trailing dot or IPv6 brackets.
    fn matches(&self, host: &str) -> bool {
        if self.wildcard {
            host.strip_suffix(self.host.as_str())
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
        } else {
            host == self.host
        }
    }
}

fn domain_rules(entries: &[String]) -> Result<Vec<DomainRule>, String> {
    entries
        .iter()
        .filter(|e| !e.trim().is_empty())
        .map(|e| DomainRule::parse(e))
        .collect()
}

impl UrlPolicy {
    /// The policy of `fetch.allow`, `fetch.allow_domains` and `fetch.deny_domains`.
    pub fn from_config(fetch: &crate::config::FetchConfig) -> Result<Self, String> {
        Self::new(&fetch.allow)?.with_domains(&fetch.allow_domains, &fetch.deny_domains)
    }

    /// Adds the operator's domain rules: entries are hosts or `*.domain`.
    pub fn with_domains(mut self, allow: &[String], deny: &[String]) -> Result<Self, String> {
        self.domains
            .push(DomainRules::parse("fetch.".into(), allow, deny)?);
        Ok(self)
    }

    /// This policy for one tenant: its domain rules apply on top of the operator's.
    pub fn narrowed(
        &self,
        tenant: &str,
        allow: &[String],
        deny: &[String],
    ) -> Result<Self, String> {
        let mut narrowed = self.clone();
        let owner = format!("the keys of tenant {tenant:?}: ");
        narrowed
            .domains
            .push(DomainRules::parse(owner, allow, deny)?);
        Ok(narrowed)
    }

    /// Whether the domain rules let `host` (as a URL writes it) be reached; the refusal names
    /// the rule.
    pub fn check_host(&self, host: &str) -> Result<(), ToolError> {
        let name = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        match self.domains.iter().find_map(|d| d.refusal(host, &name)) {
            Some(why) => Err(ToolError::new(ErrorCode::BlockedUrl, why).with_hint(
                "the operator limits which sites webpilot reaches (fetch.allow_domains, \
                 fetch.deny_domains, and each key's own); pick a URL on an allowed site",
            )),
            None => Ok(()),
        }
    }

    /// A policy that reaches nothing: for the connections a browser makes outside every
    /// session (its clock, update and account checks), which no caller asked for.
    pub fn nothing() -> Self {
        let mut policy = Self::default();
        policy.domains.push(DomainRules {
            allow: vec![DomainRule {
                written: "nothing.invalid".into(),
                host: "nothing.invalid".into(),
                wildcard: false,
            }],
            deny: Vec::new(),
            owner: "the browser's own background connections' ".into(),
        });
        policy
    }

    /// The allow-list alone: entries are IP addresses, CIDR networks (`10.0.0.0/8`) or host names.
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
        if let Some(host) = url.host_str() {
            self.check_host(host)?;
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
    let segments = ip.segments();
    let first = segments[0];
    // Forms that carry an IPv4 address are judged by it: IPv4-compatible (::a.b.c.d),
    // IPv4-translated (::ffff:0:a.b.c.d) and 6to4 (2002:aabb:ccdd::/48).
    let embedded = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if segments[..6] == [0; 6] || segments[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return is_public_v4(embedded(segments[6], segments[7]));
    }
    if first == 0x2002 {
        return is_public_v4(embedded(segments[1], segments[2]));
    }
    !(ip.is_loopback()
        || (first == 0x2001 && segments[1] == 0) // Teredo: an IPv4 tunnel, hidden
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local, incl. fd00:ec2::254 metadata
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && segments[1] == 0x0db8 // documentation
        || (first == 0x0064 && segments[1] == 0xff9b)) // NAT64 can reach private IPv4
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
            "::127.0.0.1",
            "::ffff:0:10.0.0.1",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378::1",
        ] {
            assert!(!is_public(ip(addr)), "{addr}");
        }
        for addr in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "2002:5db8:d822::1",
        ] {
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
    fn domain_rules_take_exact_hosts_and_subdomains_and_deny_wins() {
        let rules = |allow: &[&str], deny: &[&str]| {
            let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            UrlPolicy::default().with_domains(&own(allow), &own(deny))
        };
        let policy = rules(
            &["example.com", "*.example.org", "127.0.0.1"],
            &["*.bank.example.org"],
        )
        .unwrap();
        for allowed in [
            "example.com",
            "EXAMPLE.com.",
            "a.example.org",
            "x.y.example.org",
            "127.0.0.1",
        ] {
            assert!(policy.check_host(allowed).is_ok(), "{allowed}");
        }
        for refused in [
            "www.example.com",
            "example.org",
            "evil.com",
            "a.bank.example.org",
            "A.Bank.Example.Org.",
        ] {
            let error = policy.check_host(refused).unwrap_err();
            assert_eq!(error.code, ErrorCode::BlockedUrl, "{refused}");
        }
        let denied = policy.check_host("a.bank.example.org").unwrap_err();
        assert!(
            denied.message.contains("*.bank.example.org"),
            "{}",
            denied.message
        );
        let url = Url::parse("https://evil.com/").unwrap();
        assert!(
            policy
                .check_url(&url)
                .unwrap_err()
                .message
                .contains("fetch.allow_domains")
        );
        // Unicode rules match the ASCII form URLs carry.
        let unicode = rules(&[], &["bücher.example"]).unwrap();
        assert!(unicode.check_host("xn--bcher-kva.example").is_err());
        for bad in ["*", "a.*.com", "*.", "http://x.com/"] {
            assert!(rules(&[bad], &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tenant_narrows_the_operators_rules_and_never_widens_them() {
        let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let global = UrlPolicy::default()
            .with_domains(&own(&["*.example.com"]), &own(&["bad.example.com"]))
            .unwrap();
        let alice = global
            .narrowed(
                "alice",
                &own(&["*.example.com", "other.org"]),
                &own(&["*.bank.example.com"]),
            )
            .unwrap();
        assert!(alice.check_host("www.example.com").is_ok());
        // The tenant's allow-list cannot open what the operator's leaves out, nor what it denies.
        let wider = alice.check_host("other.org").unwrap_err();
        assert!(
            wider.message.contains("fetch.allow_domains"),
            "{}",
            wider.message
        );
        assert!(alice.check_host("bad.example.com").is_err());
        let narrower = alice.check_host("a.bank.example.com").unwrap_err();
        assert!(
            narrower.message.contains("tenant \"alice\"") && narrower.message.contains("*.bank"),
            "{}",
            narrower.message
        );
        // The operator's policy is left as it was.
        assert!(global.check_host("a.bank.example.com").is_ok());
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
