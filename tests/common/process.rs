//! A `webpilot serve` process of a test's own, for what only a separate process shows: whether
//! it survives a call, and how much memory it took (`/proc/<pid>/status`).

use serde_json::Value;

use super::{call_at, health, spawn_service};

/// Most memory (VmHWM) a service may have used at any time, in KiB: the budget one hostile
/// call must stay within.
pub const PEAK_BUDGET_KIB: u64 = 256 * 1024;

/// The service under test: its process and its API.
pub struct Service {
    pub child: std::process::Child,
    pub api: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Service {
    pub fn start() -> Self {
        let (data, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (child, api) = spawn_service(data.path(), tmp.path());
        Self {
            child,
            api,
            _dirs: (data, tmp),
        }
    }

    /// A field of `/proc/<pid>/status` in KiB (`VmHWM`, `VmRSS`).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the service is alive");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in {status}"))
    }

    /// The process is alive and its peak memory so far is within `PEAK_BUDGET_KIB`.
    pub fn alive_within_budget(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the service is alive"
        );
        let peak = self.memory_kib("VmHWM");
        assert!(peak < PEAK_BUDGET_KIB, "peak {peak} KiB over the budget");
    }

    /// Calls `tool`: an answer, content or a typed error with a hint, never a dropped
    /// connection; and the service still answers `/healthz` after it.
    pub async fn answers(&self, tool: &str, args: Value) -> Value {
        let (status, body) = call_at(&self.api, tool, args.clone()).await;
        assert!(
            status == 200 || body["error"]["code"].is_string(),
            "{tool} {args}: {status} {body:#}"
        );
        if status != 200 {
            assert!(
                body["error"]["hint"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty()),
                "{body:#}"
            );
        }
        assert_eq!(health(&self.api).await["ok"], true, "after {tool} {args}");
        body
    }

    /// `answers`, where the answer must be content.
    pub async fn reads(&self, tool: &str, args: Value) -> Value {
        let body = self.answers(tool, args.clone()).await;
        assert!(body["error"].is_null(), "{tool} {args}: {body:#}");
        body
    }

    /// `answers`, where the answer must be the error `code`.
    pub async fn refuses(&self, tool: &str, args: Value, code: &str) -> Value {
        let body = self.answers(tool, args.clone()).await;
        assert_eq!(body["error"]["code"], code, "{tool}: {body:#}");
        body
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
