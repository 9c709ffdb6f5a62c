//! Downloading a URL with a session's login: Chromium itself fetches it
//! (`Network.loadNetworkResource`, credentials included) in the session's browser context — its
//! cookies, its egress lane, so the URL policy and any proxy — and the bytes stream to a file
//! under the session's downloads folder, hashed on the way, up to a size cap.
//!
//! The file is written beside its final name and renamed when complete (or cut at the cap), so a
//! failed download never replaces a file saved before.

use std::io::Write;
use std::path::{Path, PathBuf};

use chromiumoxide::cdp::browser_protocol::io::{CloseParams, ReadParams, StreamHandle};
use chromiumoxide::cdp::browser_protocol::network::{
    LoadNetworkResourceOptions, LoadNetworkResourceParams,
};
use chromiumoxide::cdp::browser_protocol::page::FrameId;
use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::tab::Tab;
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Bytes asked of the browser per read.
const CHUNK: i64 = 1 << 20;

/// A file downloaded by URL.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Downloaded {
    pub path: PathBuf,
    pub bytes: u64,
    /// The media type the server declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// Hex SHA-256 of the file.
    pub sha256: String,
    /// The response was longer than the cap; the file holds its first `bytes`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A response that came back, before its body is read.
struct Response {
    status: u16,
    headers: serde_json::Value,
    stream: StreamHandle,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .as_object()?
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| value.as_str())
    }
}

impl Tab {
    /// Downloads `url` with the tab's cookies into `dir`, as `filename` or the name the server
    /// or the URL gives, at most `max_bytes`.
    pub async fn download(
        &self,
        url: &url::Url,
        dir: &Path,
        filename: Option<&str>,
        max_bytes: u64,
    ) -> ToolResult<Downloaded> {
        let response = self.load(url).await?;
        let result = async {
            if response.status >= 400 {
                return Err(ToolError::new(
                    ErrorCode::Upstream,
                    format!("{url} answered HTTP {}", response.status),
                )
                .with_hint(
                    "check the URL; if the file needs a login, log in in this session first (browser_cookies load, or the site's form)",
                ));
            }
            let name = match filename {
                Some(name) => checked_name(name)?,
                None => name_for(url, response.header("content-disposition")),
            };
            let path = dir.join(name);
            let mime = response
                .header("content-type")
                .map(|value| value.split(';').next().unwrap_or("").trim().to_string());
            let (bytes, sha256, truncated) = self.save(&response.stream, &path, max_bytes).await?;
            Ok(Downloaded {
                path,
                bytes,
                mime,
                sha256,
                truncated,
            })
        }
        .await;
        let _ = self
            .cdp(
                "closing a download",
                self.page.execute(CloseParams::new(response.stream.clone())),
            )
            .await;
        result
    }

    async fn load(&self, url: &url::Url) -> ToolResult<Response> {
        let frame = FrameId::new(self.page.target_id().inner().clone());
        let params = LoadNetworkResourceParams {
            frame_id: Some(frame),
            url: url.to_string(),
            options: LoadNetworkResourceOptions::new(true, true),
        };
        let loaded = self
            .cdp("downloading", self.page.execute(params))
            .await?
            .result
            .resource;
        let failed = |why: String| {
            ToolError::new(ErrorCode::Upstream, format!("cannot download {url}: {why}"))
                .with_hint("check the URL and that the site is reachable")
        };
        let status = loaded.http_status_code.map(|code| code as u16);
        match (loaded.success, loaded.stream) {
            (true, Some(stream)) => Ok(Response {
                status: status.unwrap_or(200),
                headers: loaded
                    .headers
                    .map(|h| h.inner().clone())
                    .unwrap_or_default(),
                stream,
            }),
            (_, stream) => {
                if let Some(stream) = stream {
                    let _ = self
                        .cdp(
                            "closing a download",
                            self.page.execute(CloseParams::new(stream)),
                        )
                        .await;
                }
                Err(match (status, loaded.net_error_name) {
                    (Some(status), _) if status >= 400 => failed(format!("HTTP {status}")),
                    (_, Some(name)) => failed(name),
                    _ => failed("the browser could not load it".into()),
                })
            }
        }
    }

    /// Streams the body to `path` (through a partial file beside it), hashing it.
    async fn save(
        &self,
        stream: &StreamHandle,
        path: &Path,
        max_bytes: u64,
    ) -> ToolResult<(u64, String, bool)> {
        let failed =
            |e: std::io::Error| ToolError::internal(format!("cannot save {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let partial = path.with_extension(match path.extension() {
            Some(extension) => format!("{}.part", extension.to_string_lossy()),
            None => "part".into(),
        });
        let written = self.write_stream(stream, &partial, max_bytes).await;
        match written {
            Ok((bytes, hash, truncated)) => {
                std::fs::rename(&partial, path).map_err(failed)?;
                Ok((bytes, hash, truncated))
            }
            Err(error) => {
                let _ = std::fs::remove_file(&partial);
                Err(error)
            }
        }
    }

    async fn write_stream(
        &self,
        stream: &StreamHandle,
        partial: &Path,
        max_bytes: u64,
    ) -> ToolResult<(u64, String, bool)> {
        let failed = |e: std::io::Error| {
            ToolError::internal(format!("cannot write {}: {e}", partial.display()))
        };
        let mut file = std::fs::File::create(partial).map_err(failed)?;
        let mut hash = Sha256::new();
        let mut written: u64 = 0;
        loop {
            let room = max_bytes - written;
            let read = ReadParams {
                handle: stream.clone(),
                offset: None,
                size: Some(CHUNK.min(i64::try_from(room + 1).unwrap_or(CHUNK))),
            };
            let chunk = self
                .cdp("reading a download", self.page.execute(read))
                .await?
                .result;
            let data = if chunk.base64_encoded == Some(true) {
                super::capture::base64_decode(&chunk.data)?
            } else {
                chunk.data.into_bytes()
            };
            let keep = data.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            file.write_all(&data[..keep]).map_err(failed)?;
            hash.update(&data[..keep]);
            written += keep as u64;
            if keep < data.len() {
                return Ok((written, hex(&hash.finalize()), true));
            }
            if chunk.eof {
                return Ok((written, hex(&hash.finalize()), false));
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file name the caller gave: a plain name, nothing that could leave the folder.
fn checked_name(name: &str) -> ToolResult<String> {
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0']);
    if plain {
        Ok(name.to_string())
    } else {
        Err(ToolError::invalid(format!(
            "field `filename`: {name:?} must be a plain file name (no folders, not starting with a dot)"
        )))
    }
}

/// The server's `Content-Disposition` name, else the URL's last path segment, made safe.
fn name_for(url: &url::Url, disposition: Option<&str>) -> String {
    let from_header = disposition.and_then(|value| {
        value.split(';').find_map(|part| {
            let (key, name) = part.trim().split_once('=')?;
            (key.trim().eq_ignore_ascii_case("filename")).then(|| name.trim().trim_matches('"'))
        })
    });
    let from_url = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .filter(|segment| !segment.is_empty());
    let raw = from_header.or(from_url).unwrap_or("download");
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    let safe: String = decoded
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.() ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.').trim();
    if safe.is_empty() {
        "download".into()
    } else {
        safe.chars().take(200).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_header_or_the_url_and_stay_in_the_folder() {
        let url = url::Url::parse("https://example.com/files/report%20Q3.pdf?x=1").unwrap();
        assert_eq!(name_for(&url, None), "report Q3.pdf");
        assert_eq!(
            name_for(&url, Some("attachment; filename=\"../../etc/passwd\"")),
            "_.._etc_passwd"
        );
        let root = url::Url::parse("https://example.com/").unwrap();
        assert_eq!(name_for(&root, None), "download");
        for bad in ["../x", "a/b", ".hidden", ""] {
            assert!(checked_name(bad).is_err(), "{bad}");
        }
        assert_eq!(checked_name("invoice.pdf").unwrap(), "invoice.pdf");
    }
}
