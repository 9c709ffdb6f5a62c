//! A site's sitemaps as crawl seeds: those its robots.txt lists (else `/sitemap.xml`), sitemap
//! index files followed, gzip sitemaps unpacked, every fetch under the task tenant's URL policy.
//! A task reads at most `MAX_FILES` sitemap files, all its sites together. Parsing is
//! sitemapo's.

use std::collections::{HashSet, VecDeque};
use std::io::Read;
use std::sync::Arc;

use url::Url;

use crate::pages::{Pages, Plain};
use crate::tenancy::Tenant;

/// Sitemap files read per task, all its sites together: an index of indexes ends here.
pub(super) const MAX_FILES: usize = 50;
/// The most a gzip sitemap unpacks to (the protocol's limit is 50 MB).
const MAX_UNPACKED: u64 = 50 * 1024 * 1024;

/// Pages the sitemaps list, each with the sitemap that listed it, at most `limit`, reading at
/// most `files` more sitemap files (counted down).
pub(super) async fn pages_listed(
    pages: &Pages,
    tenant: &Arc<Tenant>,
    (listed, origin): (Vec<String>, &str),
    limit: usize,
    files: &mut usize,
) -> Vec<(String, String)> {
    let mut queue: VecDeque<Url> = listed.iter().filter_map(|u| Url::parse(u).ok()).collect();
    if queue.is_empty() {
        queue.extend(Url::parse(&format!("{origin}/sitemap.xml")));
    }
    let (mut seen, mut found) = (HashSet::new(), Vec::new());
    while let Some(sitemap) = queue.pop_front() {
        if found.len() >= limit || *files == 0 {
            break;
        }
        if !seen.insert(sitemap.to_string()) {
            continue;
        }
        *files -= 1;
        let body = match pages.fetch_plain(tenant, &sitemap).await {
            Ok(Plain::Found(body)) => body,
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(%sitemap, %error, "sitemap not read");
                continue;
            }
        };
        let Some(listed) = read_file(body, limit - found.len()) else {
            tracing::debug!(%sitemap, "sitemap not unpacked");
            continue;
        };
        found.extend(
            listed
                .pages
                .into_iter()
                .map(|page| (page, sitemap.to_string())),
        );
        queue.extend(listed.sitemaps);
    }
    found
}

/// What one sitemap file lists.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    pub pages: Vec<String>,
    pub sitemaps: Vec<Url>,
}

/// The pages (at most `room`) and the sitemaps one file lists, gunzipped when it is gzip; its
/// records up to the first it cannot read. `None` when it does not unpack.
pub(crate) fn read_file(body: Vec<u8>, room: usize) -> Option<Listed> {
    let body = unpacked(body)?;
    let mut listed = Listed::default();
    for record in sitemapo::Parser::new(body.as_slice()) {
        match record {
            Ok(sitemapo::Record::Entry(entry)) if listed.pages.len() < room => {
                listed.pages.push(entry.location.to_string());
            }
            Ok(sitemapo::Record::Entry(_)) => break,
            Ok(sitemapo::Record::Sitemap(child)) => listed.sitemaps.push(child.location),
            Err(error) => {
                tracing::debug!(%error, "sitemap read in part");
                break;
            }
        }
    }
    Some(listed)
}

/// A sitemap's bytes, gunzipped when they are gzip (whatever the file is called).
fn unpacked(body: Vec<u8>) -> Option<Vec<u8>> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        return Some(body);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .take(MAX_UNPACKED)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_sitemaps_are_unpacked_and_plain_ones_kept() {
        let xml = b"<urlset><url><loc>https://example.com/a</loc></url></urlset>".to_vec();
        let mut packer = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        packer.write_all(&xml).unwrap();
        let packed = packer.finish().unwrap();
        assert_eq!(unpacked(packed).unwrap(), xml);
        assert_eq!(unpacked(xml.clone()).unwrap(), xml);
    }
}
