//! Operational metrics in the Prometheus text format: tool calls by tool and outcome, their
//! latency as histograms, plus gauges the caller supplies (live sessions, browser restarts).

use crate::sync::Locked;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default)]
struct Latency {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Book {
    /// (tool, outcome) → calls; outcome is `ok` or the error code.
    calls: BTreeMap<(String, String), u64>,
    latency: BTreeMap<String, Latency>,
}

/// A value known only when metrics are rendered.
pub struct Gauge<'a> {
    pub name: &'a str,
    pub help: &'a str,
    pub kind: &'a str,
    pub value: f64,
}

impl<'a> Gauge<'a> {
    /// A value that goes up and down.
    pub fn level(name: &'a str, help: &'a str, value: f64) -> Self {
        Self {
            name,
            help,
            kind: "gauge",
            value,
        }
    }

    /// A total that only grows.
    pub fn total(name: &'a str, help: &'a str, value: f64) -> Self {
        Self {
            name,
            help,
            kind: "counter",
            value,
        }
    }
}

#[derive(Default)]
pub struct Metrics {
    book: Mutex<Book>,
    auth_failures: std::sync::atomic::AtomicU64,
    /// Requests answered `BUSY` because the body budget was spent.
    body_refusals: std::sync::atomic::AtomicU64,
    /// Bytes of the body budget held now.
    body_bytes_reading: std::sync::atomic::AtomicU64,
}

impl Metrics {
    /// Counts a request refused for a missing or wrong bearer token.
    pub fn auth_failed(&self) {
        self.auth_failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Requests refused for a missing or wrong bearer token so far.
    pub fn auth_failures(&self) -> u64 {
        self.auth_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts a request refused because the request bodies being read held the whole budget.
    pub fn body_refused(&self) {
        self.body_refusals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Requests refused for the body budget so far.
    pub fn body_refusals(&self) -> u64 {
        self.body_refusals
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes `bytes` of the body budget taken.
    pub fn body_bytes_taken(&self, bytes: u64) {
        self.body_bytes_reading
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Notes `bytes` of the body budget given back (taken before).
    pub fn body_bytes_given(&self, bytes: u64) {
        self.body_bytes_reading
            .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes of the body budget held now.
    pub fn body_bytes_reading(&self) -> u64 {
        self.body_bytes_reading
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts one tool call that took `seconds`.
    pub fn record(&self, tool: &str, outcome: &str, seconds: f64) {
        let mut book = self.book.locked();
        *book
            .calls
            .entry((tool.to_string(), outcome.to_string()))
            .or_insert(0) += 1;
        let latency = book.latency.entry(tool.to_string()).or_default();
        latency.count += 1;
        latency.sum += seconds;
        for (bound, bucket) in BUCKETS.iter().zip(latency.buckets.iter_mut()) {
            if seconds <= *bound {
                *bucket += 1;
            }
        }
    }

    /// The text exposition format.
    pub fn render(&self, gauges: &[Gauge<'_>]) -> String {
        let book = self.book.locked();
        let mut out = String::new();
        header(
            &mut out,
            "webpilot_tool_calls_total",
            "Tool calls by tool and outcome (ok or the error code).",
            "counter",
        );
        for ((tool, outcome), count) in &book.calls {
            let _ = writeln!(
                out,
                "webpilot_tool_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\"}} {count}"
            );
        }
        let name = "webpilot_tool_call_duration_seconds";
        header(&mut out, name, "Tool call latency.", "histogram");
        for (tool, latency) in &book.latency {
            for (bound, bucket) in BUCKETS.iter().zip(latency.buckets) {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {bucket}"
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {}",
                latency.count
            );
            let _ = writeln!(out, "{name}_sum{{tool=\"{tool}\"}} {}", latency.sum);
            let _ = writeln!(out, "{name}_count{{tool=\"{tool}\"}} {}", latency.count);
        }
        for gauge in gauges {
            header(&mut out, gauge.name, gauge.help, gauge.kind);
            let _ = writeln!(out, "{} {}", gauge.name, gauge.value);
        }
        out
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_latency_are_counted() {
        let metrics = Metrics::default();
        metrics.record("web_search", "ok", 0.02);
        metrics.record("web_search", "UPSTREAM", 0.4);
        let text = metrics.render(&[Gauge {
            name: "webpilot_browser_sessions",
            help: "Live sessions.",
            kind: "gauge",
            value: 2.0,
        }]);
        assert!(
            text.contains("webpilot_tool_calls_total{tool=\"web_search\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("webpilot_tool_calls_total{tool=\"web_search\",outcome=\"UPSTREAM\"} 1")
        );
        assert!(text.contains(
            "webpilot_tool_call_duration_seconds_bucket{tool=\"web_search\",le=\"0.025\"} 1"
        ));
        assert!(text.contains(
            "webpilot_tool_call_duration_seconds_bucket{tool=\"web_search\",le=\"0.5\"} 2"
        ));
        assert!(text.contains("webpilot_tool_call_duration_seconds_count{tool=\"web_search\"} 2"));
        assert!(text.contains("webpilot_browser_sessions 2"));
    }
}
