//! robots.txt for crawls: each host's file is fetched once per task (through the task tenant's
//! URL policy, like its pages), a URL it disallows for webpilot's product token is never
//! fetched, and its `Crawl-delay` paces that host's fetches. Parsing is texting_robots'. Only
//! the first `MAX_BYTES` of a file are read (RFC 9309 asks crawlers to read at least 500 KiB;
//! Google reads that much): the rest is never downloaded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;
use url::Url;

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::TaskId;
use crate::sync::Locked;
use crate::tenancy::Tenant;
use crate::web::WebService;

/// The longest `Crawl-delay` honoured: a site asking for more is read this slowly.
const MAX_DELAY: Duration = Duration::from_secs(30);
/// The most of a robots.txt read: what follows is ignored, as RFC 9309 allows.
const MAX_BYTES: usize = 500 * 1024;

/// What a host's robots.txt says.
enum SiteRules {
    /// No robots.txt (a 4xx answer): everything may be read.
    Open,
    Rules(texting_robots::Robot),
    /// The file could not be had (5xx, unreachable): nothing is read, as RFC 9309 asks.
    Unreachable(String),
}

/// One task's view of one site: robots.txt is read once per task per origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TaskSite {
    task: TaskId,
    origin: String,
}

/// A site's rules, read by the first fetch that needs them.
type Rules = Arc<OnceCell<Arc<SiteRules>>>;

/// Each task's hosts' rules, and when each host may be fetched next.
pub(super) struct RobotsBook {
    /// The product token rules are matched for (`webpilot`).
    agent: String,
    /// The guarded client robots.txt files are fetched with.
    web: Arc<WebService>,
    sites: Mutex<HashMap<TaskSite, Rules>>,
    next_fetch: Mutex<HashMap<String, Instant>>,
}

impl RobotsBook {
    /// `user_agent` is the HTTP client's; its last product names the crawler to robots.txt.
    pub(super) fn new(user_agent: &str, web: Arc<WebService>) -> Self {
        Self {
            agent: product_token(user_agent),
            web,
            sites: Mutex::new(HashMap::new()),
            next_fetch: Mutex::new(HashMap::new()),
        }
    }

    /// Whether task `task` may read `url`: Ok with the host's crawl delay, or the error that
    /// reports it as skipped, naming the rule.
    pub(super) async fn check(
        &self,
        tenant: &Arc<Tenant>,
        task: &TaskId,
        url: &Url,
    ) -> ToolResult<Option<Duration>> {
        let origin = url.origin().ascii_serialization();
        match self.rules(tenant, task, &origin).await.as_ref() {
            SiteRules::Open => Ok(None),
            SiteRules::Unreachable(why) => Err(skipped(format!(
                "{origin}/robots.txt could not be read ({why}), so nothing there is read"
            ))),
            SiteRules::Rules(robot) if !robot.allowed(url.as_str()) => Err(skipped(format!(
                "{origin}/robots.txt disallows {} for {}",
                url.path(),
                self.agent
            ))),
            SiteRules::Rules(robot) => Ok(crawl_delay(robot)),
        }
    }

    /// The sitemaps `origin`'s robots.txt lists.
    pub(super) async fn sitemaps(
        &self,
        tenant: &Arc<Tenant>,
        task: &TaskId,
        origin: &str,
    ) -> Vec<String> {
        match self.rules(tenant, task, origin).await.as_ref() {
            SiteRules::Rules(robot) => robot.sitemaps.clone(),
            _ => Vec::new(),
        }
    }

    /// `origin`'s rules for task `task`, fetched by the first that asks.
    async fn rules(&self, tenant: &Arc<Tenant>, task: &TaskId, origin: &str) -> Arc<SiteRules> {
        let cell = self
            .sites
            .locked()
            .entry(TaskSite {
                task: task.clone(),
                origin: origin.to_string(),
            })
            .or_default()
            .clone();
        cell.get_or_init(|| async { Arc::new(self.fetch(tenant, origin).await) })
            .await
            .clone()
    }

    async fn fetch(&self, tenant: &Arc<Tenant>, origin: &str) -> SiteRules {
        let Ok(url) = Url::parse(&format!("{origin}/robots.txt")) else {
            return SiteRules::Open;
        };
        let client = &self.web.client;
        match client.get_limited(&url, tenant.policy(), MAX_BYTES).await {
            Ok(fetched) if (200..300).contains(&fetched.status) => {
                read_rules(&self.agent, fetched.body, fetched.truncated)
                    .map_or(SiteRules::Open, SiteRules::Rules)
            }
            Ok(fetched) if (400..500).contains(&fetched.status) => SiteRules::Open,
            Ok(fetched) => SiteRules::Unreachable(format!("HTTP {}", fetched.status)),
            // The URL policy refuses the site: its pages are refused too, each with the rule.
            Err(error) if error.code == ErrorCode::BlockedUrl => SiteRules::Open,
            Err(error) => SiteRules::Unreachable(error.message),
        }
    }

    /// Waits until `host` may be fetched again, `delay` after the fetch before.
    pub(super) async fn pace(&self, host: &str, delay: Duration) {
        let wait = {
            let mut next = self.next_fetch.locked();
            let now = Instant::now();
            let turn = next.get(host).copied().unwrap_or(now).max(now);
            next.insert(host.to_string(), turn + delay);
            turn - now
        };
        tokio::time::sleep(wait).await;
    }

    /// Forgets a finished task's rules.
    pub(super) fn forget(&self, task: &TaskId) {
        self.sites.locked().retain(|site, _| &site.task != task);
    }
}

/// A file read in part without its last line, which may be cut (`Disallow: /private` read as
/// `Disallow: /`).
/// A robots.txt's rules for `agent`, from the file's first bytes (`cut`: there were more);
/// `None` when texting_robots makes nothing of it (then everything may be read).
pub(crate) fn read_rules(agent: &str, body: Vec<u8>, cut: bool) -> Option<texting_robots::Robot> {
    texting_robots::Robot::new(agent, &whole_lines(body, cut)).ok()
}

/// The pause a site asks for between fetches, at most `MAX_DELAY`. The value is the file's:
/// one too large for a `Duration` (`Crawl-delay: 1e30`) is the longest pause, not a panic.
pub(crate) fn crawl_delay(robot: &texting_robots::Robot) -> Option<Duration> {
    robot
        .delay
        .filter(|secs| secs.is_finite() && *secs > 0.0)
        .map(|secs| Duration::try_from_secs_f32(secs).map_or(MAX_DELAY, |d| d.min(MAX_DELAY)))
}

fn whole_lines(mut body: Vec<u8>, cut: bool) -> Vec<u8> {
    if cut {
        let end = body
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        body.truncate(end);
    }
    body
}

fn skipped(message: String) -> ToolError {
    ToolError::new(ErrorCode::BlockedUrl, message).with_hint(
        "the site asks crawlers not to read this URL; it is skipped (an operator may set [crawl] robots = \"ignore\")",
    )
}

/// The crawler's name in a user agent: its last product (`… webpilot/0.1.0` → `webpilot`).
fn product_token(user_agent: &str) -> String {
    user_agent
        .split_whitespace()
        .last()
        .and_then(|product| product.split('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or("webpilot")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_token_is_the_user_agent_s_last_product() {
        assert_eq!(
            product_token("Mozilla/5.0 (X11) Chrome/131.0 Safari/537.36 webpilot/0.1.0"),
            "webpilot"
        );
        assert_eq!(product_token(""), "webpilot");
    }

    #[test]
    fn a_crawl_delay_too_large_for_a_duration_is_the_longest_pause() {
        for (file, delay) in [
            ("Crawl-delay: 1e30", Some(MAX_DELAY)),
            ("Crawl-delay: 4294967296", Some(MAX_DELAY)),
            ("Crawl-delay: 2", Some(Duration::from_secs(2))),
            ("Crawl-delay: -1", None),
            ("Crawl-delay: NaN", None),
        ] {
            let body = format!("User-agent: *\n{file}\nDisallow: /x\n").into_bytes();
            let robot = read_rules("webpilot", body, false).expect("rules");
            assert_eq!(crawl_delay(&robot), delay, "{file}");
        }
    }

    #[test]
    fn a_file_read_in_part_loses_its_cut_line() {
        let body = b"User-agent: *\nDisallow: /private/\nDisallow: /pri".to_vec();
        assert_eq!(
            whole_lines(body.clone(), true),
            b"User-agent: *\nDisallow: /private/\n"
        );
        assert_eq!(whole_lines(body.clone(), false), body);
    }

    #[tokio::test]
    async fn a_host_is_paced_by_its_delay() {
        let config = crate::config::Config::default();
        let policy = Arc::new(crate::policy::UrlPolicy::new(&[]).unwrap());
        let web = Arc::new(WebService::new(&config, policy).unwrap());
        let book = RobotsBook::new("webpilot/1", web);
        let start = Instant::now();
        for _ in 0..3 {
            book.pace("a.test:80", Duration::from_millis(40)).await;
        }
        book.pace("b.test:80", Duration::from_millis(40)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(80), "{took:?}");
        assert!(took < Duration::from_millis(2000), "{took:?}");
    }
}
