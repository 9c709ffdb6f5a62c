//! The `webpilot` command: `serve` (HTTP), `mcp` (MCP over stdio), `tools` (print definitions),
//! `call TOOL JSON`, `crawl URL…` (a batch crawl with a progress bar, results as JSON lines),
//! `skill` (a SKILL.md for coding agents, generated from the tool registry), `keys add NAME` /
//! `keys list` (tenants' keys in the keys file). In the library, not the binary: a release build
//! then compiles it once with the library instead of instantiating every generic it uses a
//! second time in the binary (that took 100 s of a fresh build on 2 cores).

mod replay;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::App;
use crate::config::{Config, ConfigArgs};
use crate::crawl::{Follow, LinkScope, TaskOptions, TaskStatus};
use crate::pages::{FetchMode, PageOptions};
use crate::tools::Caller;
use crate::web::extract::ExtractKind;
use clap::{Parser, Subcommand};
use serde::de::DeserializeOwned;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "webpilot",
    version,
    about = "Eyes and hands on the web for AI agents"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the tools over HTTP (the default).
    Serve,
    /// Print the tool definitions (OpenAI function-calling format).
    Tools,
    /// Serve the tools over MCP on standard input/output.
    Mcp,
    /// Run one tool in-process and print its JSON result.
    Call {
        /// Tool name, e.g. browser_navigate.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        /// Write images the tool returns (screenshots) to this file.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Read many URLs (as open_web_page) and write one JSON line per URL.
    Crawl {
        /// http(s) URLs.
        #[arg(required = true)]
        urls: Vec<String>,
        /// main | full | links | images | structured.
        #[arg(long, default_value = "main", value_parser = wire_name::<ExtractKind>)]
        extract: ExtractKind,
        /// auto | http | browser.
        #[arg(long, default_value = "auto", value_parser = wire_name::<FetchMode>)]
        mode: FetchMode,
        /// URLs fetched at once.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        #[command(flatten)]
        follow: FollowArgs,
        /// Write the JSON lines here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a SKILL.md that teaches a coding agent to use webpilot through `webpilot call`.
    Skill,
    /// A session's trace, from the data dir: `webpilot trace export SESSION -o run.zip`.
    Trace {
        #[command(subcommand)]
        action: TraceAction,
    },
    /// Run a trace again without a model, in a fresh session; exit status 1 when a step fails.
    Replay(replay::ReplayArgs),
    /// Manage tenants' keys: in the keys file (--keys-file, default <data dir>/keys.toml), or in
    /// PostgreSQL with --database-url, where every instance reads them at start.
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Print docs/configuration.md: every setting and flag, generated from their definitions.
    #[command(hide = true)]
    ConfigReference,
}

#[derive(Subcommand)]
enum TraceAction {
    /// Write a session's trace as a zip (trace.jsonl).
    Export {
        /// The session's name.
        session: String,
        /// A keys-file tenant's session (default: the operator's).
        #[arg(long)]
        tenant: Option<String>,
        /// The zip to write (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Make a key for a new tenant: prints the key once, writes only its SHA-256.
    Add {
        /// Tenant name: lower-case letters, digits, - and _.
        name: String,
    },
    /// List the tenants of the keys file.
    List,
}

/// How `webpilot crawl` crawls a site from its URLs (crawl_batch's `follow`); none of these:
/// only the URLs given are read.
#[derive(clap::Args, Debug)]
struct FollowArgs {
    /// Follow links this many hops from the URLs.
    #[arg(long)]
    depth: Option<u32>,
    /// Which links: same_host (default), same_site, prefix (a URL's folder) or any.
    #[arg(long, value_parser = wire_name::<LinkScope>)]
    scope: Option<LinkScope>,
    /// Only pages matching this glob (`/docs/**`, or a whole URL); repeatable.
    #[arg(long)]
    include: Vec<String>,
    /// Never pages matching this glob; repeatable.
    #[arg(long)]
    exclude: Vec<String>,
    /// Pages read at most, the URLs given included.
    #[arg(long)]
    max_pages: Option<usize>,
    /// Also start from the sites' sitemaps.
    #[arg(long)]
    sitemap: bool,
    /// List the sites' URLs with their link text; read no content.
    #[arg(long)]
    map: bool,
}

impl FollowArgs {
    /// The task's `follow`; none when no option was given.
    fn follow(self) -> Option<Follow> {
        let follow = Follow {
            depth: self.depth,
            scope: self.scope,
            include: self.include,
            exclude: self.exclude,
            max_pages: self.max_pages,
            from_sitemap: self.sitemap,
            map: self.map,
        };
        (follow != Follow::default()).then_some(follow)
    }
}

/// A value named as the tool arguments name it (`main`, `browser`).
fn wire_name<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(|e| e.to_string())
}

/// Runs the command line; the binary's `main`.
pub fn main() -> ExitCode {
    if let Some(error) = crate::browser::exec_chromium_if_launcher() {
        eprintln!("webpilot: cannot start the browser: {error}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("WEBPILOT_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,chromiumoxide=off,tungstenite=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let loaded = match cli.command {
        // Managing keys starts no service: it must work before the keys it adds exist.
        Some(Command::Keys { .. }) => Config::load_unchecked(&cli.config),
        // It describes the configuration, whichever is in force (or broken).
        Some(Command::ConfigReference) => Ok(Config::default()),
        _ => crate::app::load_config(&cli.config),
    };
    let config = match loaded {
        Ok(mut config) => {
            // Chromium is started through this binary so that it dies with this process.
            config.launcher = std::env::current_exe().ok();
            config
        }
        Err(error) => {
            eprintln!("webpilot: {error:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("webpilot: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command.unwrap_or(Command::Serve), config));
    // Everything that needs cleaning up is done by now; only a blocking read of stdin (MCP stdio,
    // ended by a signal while the client keeps the pipe open) may still hold a thread.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("webpilot: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve => serve(config).await,
        // Both print what the tools' types say: no service (browser, crawl database) is started.
        Command::Tools => {
            let definitions = crate::tools::definitions(&crate::tools::specs());
            print_json(&definitions)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Skill => {
            print_text(&crate::server::skill::skill(&crate::tools::specs()))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::ConfigReference => {
            print_text(&crate::config::reference::markdown())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { tool, args, output } => call(config, &tool, &args, output).await,
        Command::Keys { action } => keys(&config, action).await,
        Command::Trace { action } => replay::trace(config, action).await,
        Command::Replay(args) => replay::replay(config, args).await,
        Command::Mcp => {
            use rmcp::ServiceExt;
            let app = App::new(config).await?;
            crate::server::cancel_on_signal(app.stop.clone());
            // Hand-offs link to a live view; over stdio there is no other server to give it.
            crate::server::serve_live_view(&app).await?;
            let front = crate::server::mcp::McpFront::new(app.clone());
            let stdio = crate::server::mcp::stdio(app.clone(), app.tenants.operator());
            let served = front.serve(stdio).await;
            // Ends when the client closes stdin, or on SIGTERM/SIGINT (how MCP clients escalate),
            // and either way closes Chromium before exiting.
            let result = match served {
                Ok(service) => tokio::select! {
                    ended = service.waiting() => ended.map(drop).map_err(anyhow::Error::from),
                    () = app.stop.cancelled() => Ok(()),
                },
                Err(error) => Err(anyhow::anyhow!("MCP start-up failed: {error}")),
            };
            app.shutdown().await;
            result.map(|()| ExitCode::SUCCESS)
        }
        Command::Crawl {
            urls,
            extract,
            mode,
            parallel,
            follow,
            output,
        } => {
            let options = TaskOptions {
                page: PageOptions {
                    extract,
                    mode,
                    ..PageOptions::default()
                },
                parallel,
                follow: follow.follow(),
                ..TaskOptions::default()
            };
            let app = App::new(config).await?;
            crate::server::cancel_on_signal(app.stop.clone());
            let code = crawl(&app, urls, options, output).await;
            app.shutdown().await;
            code
        }
    }
}

async fn serve(mut config: Config) -> anyhow::Result<ExitCode> {
    let address = std::net::SocketAddr::new(config.bind, config.port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {address}: {e}"))?;
    if config.database_url.is_some() && config.instance_url.is_none() {
        // The other instances forward calls for this one's sessions here.
        let bound = listener.local_addr()?;
        if bound.ip().is_unspecified() {
            anyhow::bail!(
                "--instance-url is needed with --database-url when listening on {bound}: \
                 the other instances must know where to reach this one"
            );
        }
        config.instance_url = Some(format!("http://{bound}"));
    }
    let eager = config.eager_browser;
    let app = App::new(config).await?;
    crate::server::cancel_on_signal(app.stop.clone());
    if eager {
        for endpoint in 0..app.browser.pool.endpoint_count() {
            app.browser
                .pool
                .current(endpoint)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        }
    }
    tracing::info!("webpilot listening on http://{}", listener.local_addr()?);
    let stopped = app.stop.clone().cancelled_owned();
    crate::server::serve(app, listener, stopped).await?;
    Ok(ExitCode::SUCCESS)
}

async fn call(
    config: Config,
    tool: &str,
    args: &str,
    output: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let args: serde_json::Value = match serde_json::from_str(args) {
        Ok(args) => args,
        Err(e) => {
            let error =
                crate::error::ToolError::invalid(format!("arguments are not valid JSON: {e}"));
            print_json(&error.to_json())?;
            return Ok(ExitCode::from(2));
        }
    };
    let app = App::new(config).await?;
    crate::server::cancel_on_signal(app.stop.clone());
    crate::server::serve_live_view(&app).await?;
    let operator = Caller::new(app.tenants.operator()).reporting(print_handoffs());
    let result = tokio::select! {
        result = app.registry.call(tool, args, &operator) => Some(result),
        () = app.stop.cancelled() => None,
    };
    app.shutdown().await;
    let Some(result) = result else {
        return Ok(ExitCode::from(130));
    };
    match result {
        Ok(out) => {
            if let (Some(path), Some(image)) = (&output, out.images.first()) {
                std::fs::write(path, &image.data)?;
            }
            print_json(&out.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            print_json(&error.to_json())?;
            Ok(ExitCode::from(1))
        }
    }
}

/// Where hand-offs are told: each one's message and live link on stderr as it starts (the
/// person needs the link while the call waits, not in its result).
fn print_handoffs() -> tokio::sync::mpsc::UnboundedSender<crate::tools::HandoffProgress> {
    let (progress, mut waiting) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(progress) = waiting.recv().await {
            let crate::tools::HandoffProgress {
                message,
                live_url,
                waited_ms,
                ..
            } = progress;
            if waited_ms == 0 {
                eprintln!("Hand-off: {message}\nLive view: {live_url}");
            }
        }
    });
    progress
}

/// Runs a crawl task in-process with a progress bar, then writes its results as JSON lines.
async fn crawl(
    app: &App,
    urls: Vec<String>,
    options: TaskOptions,
    output: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let total = urls.len();
    let operator = app.tenants.operator();
    let id = match app.crawler.submit(&operator, urls, options).await {
        Ok(id) => id,
        Err(error) => {
            print_json(&error.to_json())?;
            return Ok(ExitCode::from(2));
        }
    };
    let bar = indicatif::ProgressBar::new(total as u64).with_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {msg}")?,
    );
    let failed = |e: crate::error::ToolError| anyhow::anyhow!(e.message);
    let (_, mut events) = app
        .crawler
        .subscribe(&operator, &id)
        .await
        .map_err(failed)?;
    loop {
        // Events move the bar; the periodic summary catches anything they missed.
        let tick = tokio::time::sleep(std::time::Duration::from_millis(500));
        tokio::select! {
            event = events.recv() => if let Ok(crate::crawl::CrawlEvent::Progress { url, .. }) = event {
                bar.set_message(url);
            },
            _ = tick => {}
            () = app.stop.cancelled() => return Ok(ExitCode::from(130)),
        }
        let summary = app.crawler.summary(&operator, &id).await.map_err(failed)?;
        // A crawl that follows links finds more as it goes.
        bar.set_length(summary.total.max(total) as u64);
        bar.set_position(summary.progress as u64);
        if summary.status.is_finished() {
            break;
        }
    }
    bar.finish_and_clear();
    let report = app.crawler.status(&operator, &id).await.map_err(failed)?;
    let results = report.results.iter().map(serde_json::to_string);
    let errors = report.errors.iter().map(serde_json::to_string);
    let skipped = report.skipped.iter().map(serde_json::to_string);
    let listed = report.listed.iter().map(serde_json::to_string);
    let mut lines = String::new();
    for line in results.chain(errors).chain(skipped).chain(listed) {
        lines.push_str(&line?);
        lines.push('\n');
    }
    match output {
        Some(path) => std::fs::write(path, lines)?,
        None => print_text(&lines)?,
    }
    let (errors, read) = (report.errors.len(), report.results.len());
    let skipped = report.skipped.len();
    eprintln!("{id}: {read} read, {errors} failed, {skipped} skipped");
    Ok(match report.summary.status {
        TaskStatus::Completed if errors == 0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// `keys add NAME` and `keys list`: in the keys file, or in PostgreSQL with `--database-url`
/// (where every instance reads them). A new entry is appended, so the file's comments and other
/// entries stay as the operator wrote them.
async fn keys(config: &Config, action: KeysAction) -> anyhow::Result<ExitCode> {
    use crate::config::{KeyEntry, KeysFile};
    let path = config.keys_path();
    let file = KeysFile::read(&path)?;
    let shared = match &config.database_url {
        Some(url) => {
            let database = crate::db::postgres::Database::connect(url).await?;
            Some(crate::tenancy::SharedKeys::open(database).await?)
        }
        None => None,
    };
    let mut entries = file.keys;
    if let Some(shared) = &shared {
        entries.extend(shared.entries().await?);
    }
    match action {
        KeysAction::List => {
            for entry in &entries {
                println!("{}", entry.tenant);
            }
        }
        KeysAction::Add { name } => {
            crate::tenancy::check_tenant_name(&name).map_err(anyhow::Error::msg)?;
            let taken = || anyhow::anyhow!("tenant {name:?} already has a key");
            if entries.iter().any(|entry| entry.tenant == name) {
                return Err(taken());
            }
            let key = crate::tenancy::new_key();
            let entry = KeyEntry {
                tenant: name.clone(),
                sha256: crate::tenancy::key_hash_hex(&key),
                ..KeyEntry::default()
            };
            let place = match &shared {
                Some(shared) => {
                    if !shared.add(&entry).await? {
                        return Err(taken());
                    }
                    "PostgreSQL".to_string()
                }
                None => {
                    let text = toml::to_string(&KeysFile { keys: vec![entry] })?;
                    append_private(&path, &text)?;
                    path.display().to_string()
                }
            };
            let when = if shared.is_some() {
                "instances running on that database take it within seconds"
            } else {
                "restart webpilot to use it"
            };
            eprintln!("added tenant {name:?} to {place} ({when}); its key, shown once:");
            println!("{key}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends `text` to `path` (created 0600 with its folder if missing) after a blank line.
fn append_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    write!(file, "\n{text}")?;
    Ok(())
}

/// Prints a JSON value, pretty, on stdout.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    print_text(&format!("{}\n", serde_json::to_string_pretty(value)?))
}

/// Prints on stdout; a reader that went away (`webpilot tools | head`) is no error.
fn print_text(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
