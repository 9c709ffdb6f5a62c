//! Which links a site crawl follows: a task's `follow` options, the scope its seeds set, the
//! include/exclude globs, and one spelling per page (fragments dropped, tracking and session
//! parameters stripped, the query sorted; `url` already lowercases hosts, writes IDNA as
//! punycode and drops default ports), so that every page is read once per task.

use std::collections::HashSet;

use globset::{Glob, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::error::{ToolError, ToolResult};

/// Deepest `follow.depth` accepted: `max_pages` bounds a crawl, this only catches typos.
const MAX_DEPTH: u32 = 32;

/// How a task finds more pages than its seeds. Its fields carry no schema descriptions of
/// their own (the tool list's size): `crawl_batch`'s description of `follow` says it all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Follow {
    // Link hops from the seeds (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<LinkScope>,
    // Globs a page must match (`/docs/**`, or whole URLs with `://`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    // Globs never read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    // Pages read (or listed) at most, seeds included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pages: Option<usize>,
    // Also start from the sites' sitemaps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_sitemap: bool,
    // List the URLs found (titled by their link text) and fetch only the pages whose links
    // lead deeper, with the sites' llms.txt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub map: bool,
}

impl Follow {
    /// Link hops from the seeds.
    pub fn depth(&self) -> u32 {
        self.depth.unwrap_or(1)
    }

    pub fn scope(&self) -> LinkScope {
        self.scope.unwrap_or_default()
    }
}

// Which links are in a crawl's scope, judged against its seeds (no schema description: the
// tool list's size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkScope {
    // A seed's host.
    #[default]
    SameHost,
    // A seed's registrable domain (`docs.example.com` and `www.example.com`).
    SameSite,
    // Under a seed's folder.
    Prefix,
    // Anywhere `include` allows.
    Any,
}

/// Why a URL a crawl found was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The site's robots.txt disallows it.
    Robots,
    /// Outside the scope, not included, or excluded.
    Scope,
    /// The task already has `max_pages` pages.
    MaxPages,
    /// Another URL of the task is the same page (a redirect led there).
    Duplicate,
    /// The task was cancelled before its turn came.
    Cancelled,
}

/// A URL the crawl found, as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// What is read: the normalised URL for links, the caller's spelling for seeds.
    pub url: String,
    /// The normalised URL: one item per key and task (none where the caller's URLs are read
    /// as given, repeats included).
    pub key: Option<String>,
    pub depth: u32,
    /// The page (or sitemap) it was found on; none for seeds.
    pub from: Option<String>,
    /// Not to be read, and why.
    pub skip: Option<SkipReason>,
    /// The rule behind `skip`, where one names it (a robots.txt line).
    pub rule: Option<String>,
    /// The link's text, for maps.
    pub title: Option<String>,
    /// Listed, not read (a map's last hop, its sitemap entries).
    pub list_only: bool,
}

impl Found {
    /// A URL the caller gave: read as given.
    fn given(url: String, key: Option<String>) -> Self {
        Self {
            url,
            key,
            depth: 0,
            from: None,
            skip: None,
            rule: None,
            title: None,
            list_only: false,
        }
    }
}

/// A task's follow options compiled against its seeds.
pub struct Frontier {
    pub follow: Follow,
    seeds: Vec<Url>,
    include: Globs,
    exclude: Globs,
}

impl Frontier {
    /// Checks `follow` (globs, depth) for a task seeded with `seeds`.
    pub fn new(follow: &Follow, seeds: &[String]) -> ToolResult<Self> {
        if follow.depth() > MAX_DEPTH {
            return Err(ToolError::invalid(format!(
                "field `follow.depth` must be at most {MAX_DEPTH}"
            )));
        }
        if follow.max_pages == Some(0) {
            return Err(ToolError::invalid(
                "field `follow.max_pages` must be at least 1",
            ));
        }
        if follow.scope() == LinkScope::Any && follow.include.is_empty() {
            return Err(ToolError::invalid(
                "field `follow.scope` is `any` but `follow.include` is empty: the crawl would follow the whole web",
            )
            .with_hint("name the URLs to follow in `include` (globs), or use scope same_site"));
        }
        Ok(Self {
            follow: follow.clone(),
            seeds: seeds
                .iter()
                .filter_map(|seed| Url::parse(seed).ok().and_then(|u| normalise(&u)))
                .collect(),
            include: Globs::new(&follow.include, "include")?,
            exclude: Globs::new(&follow.exclude, "exclude")?,
        })
    }

    /// The seeds' origins (`https://host:port`), each once, at most 16 (a crawl of many sites
    /// does not fetch a sitemap per seed).
    pub fn seed_origins(&self) -> Vec<String> {
        let origins: std::collections::BTreeSet<String> = self
            .seeds
            .iter()
            .map(|seed| seed.origin().ascii_serialization())
            .collect();
        origins.into_iter().take(16).collect()
    }

    /// Whether `url` (normalised) may be read.
    pub fn judge(&self, url: &Url) -> Result<(), SkipReason> {
        let in_scope = self.seeds.iter().any(|seed| match self.follow.scope() {
            LinkScope::SameHost => seed.host_str() == url.host_str(),
            LinkScope::SameSite => same_site(seed, url),
            LinkScope::Prefix => {
                seed.origin() == url.origin() && url.path().starts_with(folder(seed.path()))
            }
            LinkScope::Any => true,
        });
        let included = self.include.is_empty() || self.include.matches(url);
        if in_scope && included && !self.exclude.matches(url) {
            Ok(())
        } else {
            Err(SkipReason::Scope)
        }
    }

    /// The links of a page at `depth` worth keeping, each judged; links past the depth limit
    /// are left out (in a map, listed).
    pub fn links(&self, links: &[(String, String)], depth: u32, from: &str) -> Vec<Found> {
        let depth = depth + 1;
        if depth > self.follow.depth() {
            return Vec::new();
        }
        let list_only = self.follow.map && depth == self.follow.depth();
        let mut seen = HashSet::new();
        links
            .iter()
            .filter_map(|(link, text)| {
                let url = normalise(&Url::parse(link).ok()?)?;
                seen.insert(url.to_string()).then(|| {
                    let title = (!text.is_empty()).then(|| text.clone());
                    self.found(url, depth, from, title, list_only)
                })
            })
            .collect()
    }

    /// A URL found at `depth` on `from` (a page, a sitemap, an llms.txt), judged.
    pub fn found(
        &self,
        url: Url,
        depth: u32,
        from: &str,
        title: Option<String>,
        list_only: bool,
    ) -> Found {
        Found {
            skip: self.judge(&url).err(),
            rule: None,
            url: url.to_string(),
            key: Some(url.to_string()),
            depth,
            from: Some(from.to_string()),
            title,
            list_only,
        }
    }

    /// The URLs of a task that follows no links: read as given, each as often as listed.
    pub fn listed(urls: Vec<String>) -> Vec<Found> {
        urls.into_iter()
            .map(|url| Found::given(url, None))
            .collect()
    }

    /// The seeds of a site crawl as items: each once, in scope by definition.
    pub fn seeds(urls: &[String]) -> Vec<Found> {
        let mut seen = HashSet::new();
        urls.iter()
            .filter_map(|url| {
                let key = Url::parse(url)
                    .ok()
                    .and_then(|u| normalise(&u))
                    .map_or_else(|| url.clone(), |u| u.to_string());
                seen.insert(key.clone())
                    .then(|| Found::given(url.clone(), Some(key)))
            })
            .collect()
    }
}

/// Include or exclude globs: those naming whole URLs (with `://`) and those naming paths.
struct Globs {
    urls: GlobSet,
    paths: GlobSet,
}

impl Globs {
    fn new(globs: &[String], field: &str) -> ToolResult<Self> {
        let (mut urls, mut paths) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        for (index, text) in globs.iter().enumerate() {
            let glob = Glob::new(text).map_err(|e| {
                ToolError::invalid(format!(
                    "field `follow.{field}[{index}]` is not a glob: {e}"
                ))
                .with_hint("globs look like /docs/** or https://example.com/blog/*")
            })?;
            if text.contains("://") {
                urls.add(glob);
            } else {
                paths.add(glob);
            }
        }
        let built = |set: GlobSetBuilder| {
            set.build()
                .map_err(|e| ToolError::invalid(format!("field `follow.{field}`: {e}")))
        };
        Ok(Self {
            urls: built(urls)?,
            paths: built(paths)?,
        })
    }

    fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.paths.is_empty()
    }

    fn matches(&self, url: &Url) -> bool {
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        self.urls.is_match(url.as_str()) || self.paths.is_match(path)
    }
}

/// Query parameters that track a visit or carry a session, not what the page shows.
fn is_tracking(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("utm_")
        || matches!(
            name.as_str(),
            "fbclid"
                | "gclid"
                | "dclid"
                | "msclkid"
                | "yclid"
                | "igshid"
                | "mc_cid"
                | "mc_eid"
                | "_ga"
                | "_gl"
                | "jsessionid"
                | "phpsessid"
                | "sessionid"
                | "session_id"
                | "aspsessionid"
                | "cfid"
                | "cftoken"
        )
}

/// One spelling of a page's URL, or None for what is not an http(s) page.
pub fn normalise(url: &Url) -> Option<Url> {
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    let mut url = url.clone();
    url.set_fragment(None);
    // `;jsessionid=…` in the path (Java servers).
    if let Some(at) = url.path().to_ascii_lowercase().find(";jsessionid=") {
        let path = url.path()[..at].to_string();
        url.set_path(&path);
    }
    if url.query().is_some() {
        let mut pairs: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(name, _)| !is_tracking(name))
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        pairs.sort();
        if pairs.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(pairs);
        }
    }
    Some(url)
}

/// Whether two URLs share a registrable domain (the public suffix list decides).
fn same_site(a: &Url, b: &Url) -> bool {
    let site = |url: &Url| {
        let host = url.host_str()?.to_string();
        Some(registrable::domain(&host).map_or(host.clone(), str::to_string))
    };
    site(a).is_some() && site(a) == site(b)
}

/// The folder a path is in: `/docs/intro` → `/docs/`, `/docs/` → `/docs/`.
fn folder(path: &str) -> &str {
    path.rfind('/').map_or("/", |at| &path[..=at])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(url: &str) -> String {
        normalise(&Url::parse(url).unwrap()).unwrap().to_string()
    }

    #[test]
    fn one_page_has_one_spelling() {
        assert_eq!(
            norm("HTTP://Docs.Example.COM:80/a?b=2&utm_source=x&a=1#top"),
            "http://docs.example.com/a?a=1&b=2"
        );
        assert_eq!(
            norm("https://example.com:443/?utm_medium=m"),
            "https://example.com/"
        );
        assert_eq!(
            norm("http://example.com/shop;jsessionid=ABC?id=3"),
            "http://example.com/shop?id=3"
        );
        assert_eq!(
            norm("http://bücher.example/x"),
            "http://xn--bcher-kva.example/x"
        );
        assert!(normalise(&Url::parse("mailto:a@example.com").unwrap()).is_none());
    }

    fn frontier(scope: LinkScope, include: &[&str], exclude: &[&str]) -> Frontier {
        let follow = Follow {
            depth: Some(2),
            scope: Some(scope),
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            ..Follow::default()
        };
        Frontier::new(&follow, &["https://docs.example.com/guide/intro".into()]).unwrap()
    }

    fn judged(frontier: &Frontier, url: &str) -> bool {
        frontier.judge(&Url::parse(url).unwrap()).is_ok()
    }

    #[test]
    fn scopes_are_judged_against_the_seeds() {
        let host = frontier(LinkScope::SameHost, &[], &[]);
        assert!(judged(&host, "https://docs.example.com/other"));
        assert!(!judged(&host, "https://www.example.com/"));
        let site = frontier(LinkScope::SameSite, &[], &[]);
        assert!(judged(&site, "https://www.example.com/"));
        assert!(!judged(&site, "https://example.org/"));
        let prefix = frontier(LinkScope::Prefix, &[], &[]);
        assert!(judged(&prefix, "https://docs.example.com/guide/next"));
        assert!(!judged(&prefix, "https://docs.example.com/api/"));
    }

    #[test]
    fn globs_include_and_exclude_paths_or_whole_urls() {
        let globs = frontier(LinkScope::SameHost, &["/guide/**"], &["**/draft-*"]);
        assert!(judged(&globs, "https://docs.example.com/guide/a/b"));
        assert!(!judged(&globs, "https://docs.example.com/blog/a"));
        assert!(!judged(&globs, "https://docs.example.com/guide/draft-1"));
        let any = frontier(LinkScope::Any, &["https://*.example.org/**"], &[]);
        assert!(judged(&any, "https://a.example.org/x"));
        assert!(!judged(&any, "https://example.net/x"));
    }

    #[test]
    fn a_page_s_links_are_kept_once_within_the_depth() {
        let frontier = frontier(LinkScope::SameHost, &[], &[]);
        let links = [
            ("https://docs.example.com/a#x".to_string(), "A".to_string()),
            (
                "https://docs.example.com/a?utm_source=y".to_string(),
                "A again".to_string(),
            ),
            ("https://elsewhere.example.net/".to_string(), String::new()),
        ];
        let found = frontier.links(&links, 0, "https://docs.example.com/guide/intro");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].url, "https://docs.example.com/a");
        assert_eq!(found[0].title.as_deref(), Some("A"));
        assert_eq!(found[1].skip, Some(SkipReason::Scope));
        assert!(frontier.links(&links, 2, "x").is_empty());
    }
}
