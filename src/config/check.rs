//! Validation of a loaded `Config`: what would be unsafe (an exposed bind without a key, weak
//! tokens and secrets) or cannot work (zero limits, malformed URLs and proxy networks).

use super::Config;

/// Shortest bearer token accepted.
const MIN_TOKEN_CHARS: usize = 16;

impl Config {
    /// `trusted_proxies` as networks (an address is a network of one).
    pub fn proxy_networks(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        self.trusted_proxies
            .iter()
            .map(|entry| {
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "trusted_proxies: {entry:?} is not an IP address or network"
                        )
                    })
            })
            .collect()
    }

    /// Refuses a non-loopback bind that nobody's key guards.
    pub fn check_exposure(&self) -> anyhow::Result<()> {
        if !self.bind.is_loopback()
            && self.token.as_deref().is_none_or(str::is_empty)
            && self.keys.is_empty()
        {
            anyhow::bail!(
                "binding to {} exposes the browser to the network: set --token (or WEBPILOT_TOKEN) \
                 or give tenants keys (--keys-file, or `webpilot keys add` with --database-url)",
                self.bind
            );
        }
        Ok(())
    }

    /// Refuses configurations that would be unsafe or cannot work. The tenants' settings (the
    /// URL policy, rates and every key) are the tenants' to check: `app::load_config` and
    /// `App::new` build them.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(token) = &self.token
            && (token.trim().is_empty() || token.chars().count() < MIN_TOKEN_CHARS)
        {
            anyhow::bail!(
                "--token (WEBPILOT_TOKEN) must be at least {MIN_TOKEN_CHARS} characters, not blank: \
                 a short token is soon guessed (e.g. `openssl rand -hex 24`)"
            );
        }
        // Keys kept in PostgreSQL are read at start, and checked then.
        if self.database_url.is_none() {
            self.check_exposure()?;
        }
        self.proxy_networks()?;
        self.actions.check("actions")?;
        if self.max_sessions == 0 {
            anyhow::bail!("max_sessions must be at least 1");
        }
        if self.browser_concurrency == Some(0) {
            anyhow::bail!("browser_concurrency must be at least 1");
        }
        for (flag, value) in [
            ("--public-url", &self.public_url),
            ("--instance-url", &self.instance_url),
        ] {
            if let Some(value) = value {
                let parsed = url::Url::parse(value)
                    .map_err(|e| anyhow::anyhow!("{flag} {value:?} is not a URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    anyhow::bail!("{flag} must be an http(s) URL like https://pilot.example.com");
                }
            }
        }
        if let Some(database) = &self.database_url
            && !(database.starts_with("postgres://") || database.starts_with("postgresql://"))
        {
            anyhow::bail!("--database-url must be a postgres:// URL");
        }
        if self.max_body_bytes_in_flight == 0 {
            anyhow::bail!("max_body_bytes_in_flight must be at least 1");
        }
        if self.trace.screenshot_quality > 100 {
            anyhow::bail!("trace screenshot_quality must be 0 (none) to 100");
        }
        if self.crawl.lease_secs == 0 {
            anyhow::bail!("crawl lease_secs must be at least 1");
        }
        if self
            .live_secret
            .as_deref()
            .is_some_and(|s| s.len() < MIN_TOKEN_CHARS)
        {
            anyhow::bail!("live_secret must be at least {MIN_TOKEN_CHARS} characters");
        }
        if self.max_profile_cookies == 0 {
            anyhow::bail!("max_profile_cookies must be at least 1");
        }
        if self.live_link_secs == 0 {
            anyhow::bail!("live_link_secs must be at least 1");
        }
        let crawl = &self.crawl;
        if [
            crawl.max_urls,
            crawl.max_parallel,
            crawl.global_parallel,
            crawl.per_host,
            crawl.browser_parallel,
        ]
        .contains(&0)
        {
            anyhow::bail!(
                "crawl limits (max_urls, max_parallel, global_parallel, per_host, browser_parallel) must be at least 1"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigArgs;

    #[test]
    fn non_loopback_bind_requires_a_token() {
        let args = ConfigArgs {
            bind: Some("0.0.0.0".parse().unwrap()),
            ..Default::default()
        };
        let mut config = Config::default();
        config.apply(&args);
        assert!(config.validate().is_err());
        for weak in ["x", "secret", &" ".repeat(20)] {
            config.token = Some(weak.into());
            assert!(config.validate().is_err(), "{weak:?}");
        }
        config.token = Some("a3f9c1e07b5d2468".into());
        assert!(config.validate().is_ok());
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let mut config = Config {
            trusted_proxies: vec!["10.0.0.0/8".into(), "192.0.2.1".into(), "::1".into()],
            ..Config::default()
        };
        assert_eq!(config.proxy_networks().unwrap().len(), 3);
        assert!(config.validate().is_ok());
        config.trusted_proxies.push("nginx".into());
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("\"nginx\""), "{error}");
    }
}
