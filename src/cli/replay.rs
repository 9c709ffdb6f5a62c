//! `webpilot trace export` and `webpilot replay`: a session's trace out of the data dir, and a
//! trace run again in-process without a model.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{TraceAction, print_json};
use crate::App;
use crate::config::Config;
use crate::ids::{SessionName, TenantName};
use crate::replay::{Expectations, HandoffMode, Options, junit_xml, playwright_spec};
use crate::trace::{Traces, read_steps};

pub(super) async fn trace(config: Config, action: TraceAction) -> anyhow::Result<ExitCode> {
    let TraceAction::Export {
        session,
        tenant,
        output,
    } = action;
    let session = SessionName::parse(&session).map_err(|e| anyhow::anyhow!(e.message))?;
    let tenants = crate::tenancy::Tenants::from_config(&config)?;
    let tenant = match tenant {
        Some(name) => {
            let name = TenantName::from_stored(&name);
            tenants
                .named(&name)
                .ok_or_else(|| anyhow::anyhow!("no tenant {name:?} in the keys file"))?
        }
        None => tenants.operator().clone(),
    };
    let traces = Traces::new(config.data_dir.clone(), config.trace.clone());
    let zip = match traces.export(&tenant, &session).await {
        Ok(zip) => zip,
        Err(error) => {
            print_json(&error.to_json())?;
            return Ok(ExitCode::from(1));
        }
    };
    match output {
        Some(path) => std::fs::write(&path, zip)?,
        None => std::io::Write::write_all(&mut std::io::stdout(), &zip)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// What `webpilot replay` is asked.
#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    /// The trace: a zip from `trace export` or `GET /api/sessions/{session}/trace`, or its
    /// trace.jsonl.
    trace: PathBuf,
    /// Where the recorded site lives now (replaces the origin of its first navigation).
    #[arg(long)]
    base_url: Option<String>,
    /// A secret's value, `name=value` (else WEBPILOT_SECRET_<NAME>); repeatable.
    #[arg(long = "secret", value_name = "NAME=VALUE")]
    secrets: Vec<String>,
    /// Also write the report as JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the pictures of a failed step here: the page before it as recorded
    /// (`step-N-then.jpg`) and as the replay found it (`step-N-now.jpg`).
    #[arg(long, value_name = "DIR")]
    artifacts: Option<PathBuf>,
    /// At the end, the page must show this text (frames included); repeatable.
    #[arg(long = "expect-text", value_name = "TEXT")]
    expect_text: Vec<String>,
    /// At the end, the URL must contain this (or match it, with `*`).
    #[arg(long)]
    expect_url: Option<String>,
    /// No console error or page error in the replay.
    #[arg(long)]
    expect_no_console_errors: bool,
    /// No request of the replay answered 4xx/5xx or failed.
    #[arg(long)]
    expect_no_failed_requests: bool,
    /// What a person did during the recording (a hand-off): do it again by element, leave it
    /// out, or fail there.
    #[arg(long, value_enum, default_value = "replay")]
    handoff: HandoffMode,
    /// Instead of replaying, print the trace as a test file of this framework
    /// (`--export playwright > checkout.spec.ts`; `--base-url` and the expectations go in it).
    #[arg(long, value_name = "FORMAT")]
    export: Option<ExportFormat>,
}

/// What `--export` writes.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum ExportFormat {
    /// A Playwright Test file (TypeScript), run with `npx playwright test`.
    Playwright,
}

pub(super) async fn replay(config: Config, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let ReplayArgs {
        trace,
        base_url,
        secrets,
        junit,
        artifacts,
        expect_text,
        expect_url,
        expect_no_console_errors,
        expect_no_failed_requests,
        export,
        handoff,
    } = args;
    let expect = Expectations {
        text: expect_text,
        url: expect_url,
        no_console_errors: expect_no_console_errors,
        no_failed_requests: expect_no_failed_requests,
    };
    let trace = trace.as_path();
    let bytes = std::fs::read(trace)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", trace.display()))?;
    let steps = read_steps(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
    let name = trace
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("replay");
    if let Some(ExportFormat::Playwright) = export {
        let spec = playwright_spec(&steps, name, base_url.as_deref(), &expect);
        std::io::Write::write_all(&mut std::io::stdout(), spec.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut options = Options {
        base_url,
        expect,
        secrets_from_env: true,
        handoff,
        ..Options::default()
    };
    for secret in &secrets {
        let (name, value) = secret
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--secret {secret:?}: expected NAME=VALUE"))?;
        options.secrets.insert(name.to_string(), value.to_string());
    }
    let app = App::new(config).await?;
    crate::server::cancel_on_signal(app.stop.clone());
    if handoff == HandoffMode::Ask {
        // A person asked for needs a live view to reach.
        crate::server::serve_live_view(&app).await?;
        options.handoff_progress = Some(super::print_handoffs());
    }
    let tenant = app.tenants.operator().clone();
    let mut report = crate::replay::run(&app.registry, tenant, &steps, &options).await;
    app.shutdown().await;
    if let Some(dir) = artifacts {
        save_pictures(&mut report, &bytes, &dir)?;
    }
    if let Some(path) = junit {
        std::fs::write(path, junit_xml(&report, name))?;
    }
    print_json(&report)?;
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes the pictures of failed steps into `dir`, naming them in the report.
fn save_pictures(
    report: &mut crate::replay::Report,
    trace: &[u8],
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    for step in report.steps.iter_mut() {
        let then = step
            .then
            .as_deref()
            .and_then(|name| crate::trace::read_image(trace, name));
        for (when, picture) in [("then", then), ("now", step.now.take())] {
            let Some(picture) = picture else { continue };
            std::fs::create_dir_all(dir)?;
            let path = dir.join(format!("step-{}-{when}.jpg", step.seq));
            std::fs::write(&path, picture)?;
            step.pictures.push(path.display().to_string());
        }
    }
    Ok(())
}
