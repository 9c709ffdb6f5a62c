//! webpilot gives AI agents eyes and hands on the web: one headless Chromium behind a few
//! merged tools, served to agent loops over HTTP (OpenAI function-calling format) and MCP.
//!
//! # Layout
//! - [`cli`]: the `webpilot` command line (the binary's `main` calls it).
//! - [`config`]: one `Config` — defaults ← `webpilot.toml` ← `WEBPILOT_*` env ← flags.
//! - [`error`]: `ToolError { code, message, hint }`, the error every tool and front returns.
//! - [`ids`]: the nouns' names — `TenantName`, `SessionName`, `SessionId` — and unguessable names.
//! - [`policy`]: which URLs webpilot may reach (fetches and browser documents alike).
//! - [`profiles`]: saved logins — the model, where they are kept (files or PostgreSQL), their formats.
//! - [`files`]: which server files tools may read (under the configured roots, capped).
//! - [`tenant`]: who a caller is (keys, the operator), what is theirs, and their limits.
//! - [`rate`]: token buckets for call rates.
//! - [`capability`]: signed, expiring links to one session's live view, and where they point.
//! - [`metrics`]: tool call counts and latencies as Prometheus text.
//! - [`sync`]: locks that outlive a panic (one recovery policy for every `std::sync` lock).
//! - [`tools`]: the registry (`ToolSpec`s: input and output schemas, guides), the one call
//!   wrapper (session, tab, deadline, reply fields) and one file per tool.
//! - [`crawl`]: batch crawl tasks — bounded parallelism, a SQLite or PostgreSQL store with
//!   leases shared by instances, progress events.
//! - [`cluster`]: instances sharing PostgreSQL — heartbeats, which instance holds which session.
//! - [`postgres`]: the PostgreSQL pool, migrations and `LISTEN`, when `--database-url` is set.
//! - [`pages`]: reading one page as a service — HTTP or a browser render, extraction, paging.
//! - [`browser`]: everything that speaks CDP — pool, sessions and tabs, readiness, element
//!   refs, content. Nothing outside this module names chromiumoxide.
//! - [`egress`]: the policy proxy every connection of Chromium goes through (SOCKS5, one lane
//!   per browser context, refusals logged per lane).
//! - [`web`]: the browserless side — guarded HTTP client, search backends, extraction, Markdown.
//! - [`agent`]: the tool loop driving any OpenAI-compatible model, and stored conversations.
//! - [`server`]: axum fronts — REST, chat (SSE), crawler, MCP, the live view, OpenAPI, auth,
//!   shutdown.
//! - [`app`]: wires everything together for the server and the CLI.
//!
//! Dependencies point one way: `server` → `agent` → `tools` → `crawl` → `pages` → `browser` |
//! `web`, and `browser` → `egress`; all may use `config`, `error`, `policy`, `files`, `rate`, `tenant` and `capability`
//! (ARCHITECTURE.md).

pub mod agent;
pub mod app;
pub mod browser;
pub mod capability;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod crawl;
pub mod egress;
pub mod error;
pub mod files;
pub mod ids;
pub mod metrics;
pub mod pages;
pub mod policy;
pub mod postgres;
pub mod profiles;
pub mod rate;
pub mod server;
pub mod sync;
pub mod tenant;
pub mod tools;
pub mod web;

pub use app::App;
