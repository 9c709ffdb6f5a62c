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
//! - [`tenancy`]: who calls and what is theirs — tenants and keys, call rates, the server files
//!   a tenant may read, signed live-view links.
//! - [`db`]: the shared PostgreSQL (pool, migrations, `LISTEN`) and the instances sharing it.
//! - [`metrics`]: tool call counts and latencies as Prometheus text.
//! - [`sync`]: locks that outlive a panic (one recovery policy for every `std::sync` lock).
//! - [`timing`]: where a call's time went, stage by stage (REST's `Server-Timing`).
//! - [`tools`]: the registry (`ToolSpec`s: input and output schemas, guides), the one call
//!   wrapper (session, tab, deadline, reply fields) and one file per tool.
//! - [`crawl`]: batch crawl tasks — bounded parallelism, a SQLite or PostgreSQL store with
//!   leases shared by instances, progress events.
//! - [`trace`]: each session's trace of its tool calls (with the elements they acted on), kept
//!   as JSON Lines and exported as a zip.
//! - [`pages`]: reading one page as a service — HTTP or a browser render, extraction, paging.
//! - [`browser`]: everything that speaks CDP — pool, sessions and tabs, readiness, element
//!   refs, content. Nothing outside this module names chromiumoxide.
//! - [`egress`]: the policy proxy every connection of Chromium goes through (SOCKS5, one lane
//!   per browser context, refusals logged per lane).
//! - [`web`]: the browserless side — guarded HTTP client, search backends, extraction, Markdown.
//! - [`replay`]: a trace run again without a model — elements found again by identity, healed
//!   steps reported, JUnit XML.
//! - [`agent`]: the tool loop driving any OpenAI-compatible model, and stored conversations.
//! - [`server`]: axum fronts — REST, chat (SSE), crawler, MCP, the live view, OpenAPI, auth,
//!   shutdown.
//! - [`app`]: wires everything together for the server and the CLI.
//! - [`fuzzing`]: the parsers of outside input as fuzz targets (`fuzz/`, replayed by the suite).
//!
//! Dependencies point one way, down the layers of ARCHITECTURE.md (checked from the parsed
//! imports by `tests/architecture.rs`): `cli` → `server` → `app` | `fuzzing` → `agent` |
//! `replay` → `tools` → `crawl` | `trace` → `pages` → `browser` | `web` → `egress` | `profiles` →
//! `tenancy` → `db` → `policy` | `metrics` → `config` → `error` | `ids` | `sync`.

pub mod agent;
pub mod app;
pub mod browser;
pub mod cli;
pub mod config;
pub mod crawl;
pub mod db;
pub mod egress;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod ids;
pub mod metrics;
pub mod pages;
pub mod policy;
pub mod profiles;
pub mod replay;
pub mod server;
pub mod sync;
pub mod tenancy;
pub mod timing;
pub mod tools;
pub mod trace;
pub mod web;

pub use app::App;
