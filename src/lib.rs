//! webpilot gives AI agents eyes and hands on the web: one headless Chromium behind a few
//! merged tools, served to agent loops over HTTP (OpenAI function-calling format).
//!
//! # Layout
//! - [`config`]: one `Config` — defaults ← `webpilot.toml` ← `WEBPILOT_*` env ← flags.
//! - [`error`]: `ToolError { code, message, hint }`, the error every tool and front returns.
//! - [`policy`]: which URLs webpilot may reach (fetches and browser documents alike).
//! - [`tools`]: the registry and one file per tool (typed args → JSON schema, a short handler).
//! - [`browser`]: everything that speaks CDP — pool, sessions and tabs, readiness, element
//!   refs, content. Nothing outside this module names chromiumoxide.
//! - [`web`]: the browserless side — HTML → Markdown, section ranking.
//! - [`server`]: axum fronts — REST (`/api/tools`), auth, graceful shutdown.
//! - [`app`]: wires config, browser and registry together for the server and the CLI.
//!
//! Dependencies point one way: `server` → `tools` → `browser` | `web`; all may use `config`,
//! `error` and `policy`.

pub mod agent;
pub mod app;
pub mod browser;
pub mod config;
pub mod crawl;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod server;
pub mod tools;
pub mod web;

pub use app::App;
