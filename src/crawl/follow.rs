//! A site crawl's growth: after a page is read, the pages it links to (and, for the first
//! seed, the sites' sitemaps) join the task, judged by its frontier and deduplicated by the
//! store, before the page's own outcome is recorded, so that a task never looks finished
//! while a page that may add more is in flight. A page whose redirect ends at a page the task
//! already has is recorded as a duplicate: each page is read once.

use super::*;
use crate::pages::Plain;

impl Crawler {
    /// What a site crawl records for a page it read: the page, after adding what it links to;
    /// or a duplicate, when it redirected to a page of the task.
    pub(super) async fn discovered(
        &self,
        tenant: &Arc<Tenant>,
        item: &Item<'_>,
        frontier: &Frontier,
        mut page: Page,
    ) -> ItemOutcome {
        let links = std::mem::take(&mut page.links);
        if let Some(duplicate) = self.redirected(tenant, item, &page).await {
            return duplicate;
        }
        let mut found = frontier.links(&links, item.depth, &page.final_url);
        if item.index == 0 && frontier.follow.from_sitemap {
            found.extend(self.sitemap_pages(tenant, item.id, frontier).await);
        }
        if item.index == 0 && frontier.follow.map {
            found.extend(self.llms_txt_links(tenant, frontier).await);
        }
        self.judge_listed_by_robots(tenant, item.id, &mut found)
            .await;
        self.add_found(tenant, item.id, &frontier.follow, &found)
            .await;
        if frontier.follow.map {
            let title = Some(page.title).filter(|t| !t.is_empty());
            return ItemOutcome::Listed(Listing { title });
        }
        ItemOutcome::Read(Box::new(page))
    }

    /// Marks what a map lists without reading (its last hop, sitemap and llms.txt entries) as
    /// skipped where robots.txt keeps a crawl from reading it, as a crawl would report it, so
    /// that a map shows what may be read rather than everything linked.
    async fn judge_listed_by_robots(&self, tenant: &Arc<Tenant>, id: &TaskId, found: &mut [Found]) {
        for entry in found.iter_mut().filter(|f| f.list_only && f.skip.is_none()) {
            let url = url::Url::parse(&entry.url).ok();
            if let Err(rule) = self.robots_allow(tenant, id, url.as_ref()).await {
                entry.skip = Some(SkipReason::Robots);
                entry.rule = Some(rule.message);
            }
        }
    }

    /// The pages the seeds' sites list in their `llms.txt` (their overview for agents), with
    /// the links' text, for a map.
    async fn llms_txt_links(&self, tenant: &Arc<Tenant>, frontier: &Frontier) -> Vec<Found> {
        let mut found = Vec::new();
        for origin in frontier.seed_origins() {
            let Ok(url) = url::Url::parse(&format!("{origin}/llms.txt")) else {
                continue;
            };
            let Ok(Plain::Found(body)) = self.pages.fetch_plain(tenant, &url).await else {
                continue;
            };
            let text = String::from_utf8_lossy(&body);
            for (link, title) in crate::pages::markdown_links(&text, &url) {
                if let Some(normal) = url::Url::parse(&link)
                    .ok()
                    .and_then(|u| frontier::normalise(&u))
                {
                    let title = Some(title).filter(|t| !t.is_empty());
                    found.push(frontier.found(normal, 1, url.as_str(), title, true));
                }
            }
        }
        found
    }

    /// Adds found URLs to the task, within its `max_pages`; false when the store refused.
    async fn add_found(
        &self,
        tenant: &Tenant,
        id: &TaskId,
        follow: &Follow,
        found: &[Found],
    ) -> Option<Vec<bool>> {
        if found.is_empty() {
            return Some(Vec::new());
        }
        let max_pages = self.max_pages(tenant, follow);
        match self
            .store
            .add(id, found, max_pages, self.config.per_host)
            .await
        {
            Ok(added) => Some(added),
            Err(error) => {
                tracing::error!(task = %id, %error, "cannot add the pages a crawl found");
                None
            }
        }
    }

    /// The duplicate outcome of a page that redirected to a page the task already has; else
    /// None, with the redirect's end kept so that no other link reads it again.
    async fn redirected(
        &self,
        tenant: &Arc<Tenant>,
        item: &Item<'_>,
        page: &Page,
    ) -> Option<ItemOutcome> {
        let asked = url::Url::parse(&item.url)
            .ok()
            .and_then(|u| frontier::normalise(&u));
        let ended = url::Url::parse(&page.final_url)
            .ok()
            .and_then(|u| frontier::normalise(&u))?;
        if asked.as_ref() == Some(&ended) {
            return None;
        }
        let end = Found {
            url: ended.to_string(),
            key: Some(ended.to_string()),
            depth: item.depth,
            from: Some(item.url.clone()),
            skip: Some(SkipReason::Duplicate),
            rule: None,
            title: None,
            list_only: false,
        };
        let follow = item.frontier.map(|f| &f.follow)?;
        let added = self.add_found(tenant, item.id, follow, &[end]).await?;
        (added == [false]).then(|| {
            ItemOutcome::Skipped(Skip {
                reason: SkipReason::Duplicate,
                rule: Some(format!("redirects to {ended}, a page this crawl has")),
                title: None,
            })
        })
    }

    /// The pages the seeds' sites list in their sitemaps, at depth 0, judged by the frontier;
    /// at most `sitemaps::MAX_FILES` sitemap files are read for all the sites together.
    async fn sitemap_pages(
        &self,
        tenant: &Arc<Tenant>,
        id: &TaskId,
        frontier: &Frontier,
    ) -> Vec<Found> {
        let limit = self.max_pages(tenant, &frontier.follow);
        let (mut found, mut files) = (Vec::new(), sitemaps::MAX_FILES);
        for origin in frontier.seed_origins() {
            let listed = self.robots.sitemaps(tenant, id, &origin).await;
            let site = (listed, origin.as_str());
            let entries =
                sitemaps::pages_listed(&self.pages, tenant, site, limit, &mut files).await;
            for (url, sitemap) in entries {
                let Some(normal) = url::Url::parse(&url)
                    .ok()
                    .and_then(|u| frontier::normalise(&u))
                else {
                    continue;
                };
                // A map lists what sitemaps list; a crawl reads it.
                found.push(frontier.found(normal, 0, &sitemap, None, frontier.follow.map));
            }
        }
        found
    }

    /// The most pages a site crawl of `tenant` reads: its `max_pages`, within the URL limits.
    pub(super) fn max_pages(&self, tenant: &Tenant, follow: &Follow) -> usize {
        let limit = tenant
            .crawl_max_urls()
            .map_or(self.config.max_urls, |own| own.min(self.config.max_urls));
        follow.max_pages.map_or(limit, |pages| pages.min(limit))
    }
}
