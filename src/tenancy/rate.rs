//! Token buckets: a tenant's call rates per tool (`[rate]` and a key's `[keys.rate]`:
//! `web_search = "10/min"`, a `default`), failed authentications per client address. A call
//! past its quota is `LIMIT` with how long to wait.

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, ToolError, ToolResult};

/// `count` calls per `period`, refilled continuously.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    pub count: u32,
    pub period: Duration,
}

impl Quota {
    /// `"10/min"`, `"2/sec"`, `"100/hour"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = || format!("{text:?} is not a rate like \"10/min\" (per sec, min or hour)");
        let (count, unit) = text.trim().split_once('/').ok_or_else(invalid)?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        let period = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(invalid()),
        };
        if count == 0 {
            return Err(invalid());
        }
        Ok(Self { count, period })
    }

    fn describe(&self) -> String {
        let unit = match self.period.as_secs() {
            1 => "second",
            60 => "minute",
            _ => "hour",
        };
        format!("{} calls per {unit}", self.count)
    }
}

/// What is left of a quota.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// The quotas and their buckets, by tool.
#[derive(Debug, Default)]
pub struct RateLimiter {
    quotas: HashMap<String, Quota>,
    default: Option<Quota>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// From `[rate]`: tool names (or `default`) to rates.
    pub fn new(rates: &HashMap<String, String>) -> Result<Self, String> {
        let mut limiter = Self::default();
        for (tool, rate) in rates {
            let quota = Quota::parse(rate).map_err(|e| format!("rate.{tool}: {e}"))?;
            if tool == "default" {
                limiter.default = Some(quota);
            } else {
                limiter.quotas.insert(tool.clone(), quota);
            }
        }
        Ok(limiter)
    }

    /// One quota for every key (client addresses, say).
    pub fn keyed(quota: Quota) -> Self {
        Self {
            default: Some(quota),
            ..Self::default()
        }
    }

    /// Seconds until `key` may go on, if its bucket is empty now (nothing is taken).
    pub fn exhausted(&self, key: &str) -> Option<u64> {
        self.with_bucket(key, |_, _| ()).and_then(|(_, wait)| wait)
    }

    /// Refills `key`'s bucket, lets `act` take from it, and returns what `act` gave along with
    /// the seconds to wait when the bucket is then empty; `None` without a quota for `key`.
    fn with_bucket<T>(
        &self,
        key: &str,
        act: impl FnOnce(&mut Bucket, &Quota) -> T,
    ) -> Option<(T, Option<u64>)> {
        let quota = self.quotas.get(key).or(self.default.as_ref())?;
        let mut buckets = self.buckets.locked();
        let now = Instant::now();
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: f64::from(quota.count),
            refilled: now,
        });
        let per_token = quota.period.as_secs_f64() / f64::from(quota.count);
        let earned = now.duration_since(bucket.refilled).as_secs_f64() / per_token;
        bucket.tokens = (bucket.tokens + earned).min(f64::from(quota.count));
        bucket.refilled = now;
        let outcome = act(bucket, quota);
        let wait = (bucket.tokens < 1.0)
            .then(|| ((1.0 - bucket.tokens) * per_token).ceil().max(1.0) as u64);
        Some((outcome, wait))
    }

    /// Takes one call of `tool` from its bucket, or says how long to wait.
    pub fn take(&self, tool: &str) -> ToolResult<()> {
        let taken = self.with_bucket(tool, |bucket, quota| {
            if bucket.tokens >= 1.0 {
                bucket.tokens -= 1.0;
                Ok(())
            } else {
                Err(*quota)
            }
        });
        let (quota, wait) = match taken {
            None | Some((Ok(()), _)) => return Ok(()),
            Some((Err(quota), wait)) => (quota, wait.unwrap_or(1)),
        };
        Err(ToolError::new(
            ErrorCode::Limit,
            format!("{tool} is limited to {}", quota.describe()),
        )
        .with_hint(format!(
            "wait {wait} s (Retry-After) before calling {tool} again; the operator sets the quota in [rate]"
        ))
        .retry_after(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_buckets_empty() {
        assert_eq!(
            Quota::parse("10/min").unwrap(),
            Quota {
                count: 10,
                period: Duration::from_secs(60)
            }
        );
        for bad in ["", "10", "0/min", "x/min", "10/week"] {
            assert!(Quota::parse(bad).is_err(), "{bad}");
        }
        let rates = HashMap::from([
            ("web_search".to_string(), "3/min".to_string()),
            ("default".to_string(), "100/sec".to_string()),
        ]);
        let limiter = RateLimiter::new(&rates).unwrap();
        for _ in 0..3 {
            limiter.take("web_search").unwrap();
        }
        let refused = limiter.take("web_search").unwrap_err();
        assert_eq!(refused.code, ErrorCode::Limit);
        assert!(
            refused.message.contains("3 calls per minute"),
            "{}",
            refused.message
        );
        assert!((1..=20).contains(&refused.retry_after_secs.unwrap()));
        // Other tools have their own bucket (the default quota).
        limiter.take("open_web_page").unwrap();
        let unlimited = RateLimiter::new(&HashMap::new()).unwrap();
        for _ in 0..1000 {
            unlimited.take("web_search").unwrap();
        }
    }
}
