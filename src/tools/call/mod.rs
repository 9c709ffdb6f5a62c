//! The one wrapper every tool call goes through, whatever the front: arguments parsed into the
//! tool's type (errors name the field), the session name chosen and checked (the default lives
//! here only), the session opened when the tool first needs it, the tab and the deadline
//! resolved by one rule, a tracing span with session and tab, and the reply built from the
//! typed output plus `session`/`tab`/`url`/`title` (browser tools) and `elapsed_ms`.

mod traced;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tracing::Instrument;
use tracing::field::Empty;

use super::{Caller, Ctx, Image, Scope, Tool, ToolOutput, ToolSpec, schema};
use crate::browser::live::LiveHub;
use crate::browser::{Blocked, REPORTED_WAIT, SessionGuard, Tab, Told, Turn};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::{MAX_SESSION_NAME, SessionId, SessionName};
use crate::metrics::Metrics;
use crate::policy::UrlPolicy;
use crate::tenancy::Tenant;

/// Bounds of every `timeout_ms` (but a wait for a person's).
const MIN_TIMEOUT_MS: u64 = 100;
const MAX_TIMEOUT_MS: u64 = 120_000;
/// A call that waits for a person (a hand-off) may wait this long by default, and at most
/// `MAX_PERSON_WAIT_MS`.
pub const PERSON_WAIT_MS: u64 = 600_000;
const MAX_PERSON_WAIT_MS: u64 = 3_600_000;
// The types of the shared fields, for their bounds in the schema. (Plain comments: a doc
// comment would repeat itself in every tool's schema.)
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct SessionField(
    #[schemars(length(min = 1, max = MAX_SESSION_NAME), regex(pattern = r"^[A-Za-z0-9._:@-]+$"))]
    pub String,
);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TimeoutMs(#[schemars(range(min = MIN_TIMEOUT_MS, max = MAX_TIMEOUT_MS))] pub u64);

// The time limit of a tool that may wait for a person; only those calls may go past
// MAX_TIMEOUT_MS (checked at run time).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct PersonTimeoutMs(
    #[schemars(range(min = MIN_TIMEOUT_MS, max = MAX_PERSON_WAIT_MS))] pub u64,
);

/// The fields of a tool's arguments that `Call` resolves, the same way for every tool.
pub trait Shared {
    fn session(&self) -> Option<&str> {
        None
    }
    fn tab(&self) -> Option<&str> {
        None
    }
    fn timeout_ms(&self) -> Option<u64> {
        None
    }
    /// Whether the call waits for a person (longer time limits).
    fn waits_for_person(&self) -> bool {
        false
    }
}

/// `impl Shared` for an args struct from the shared fields it declares:
/// `shared_fields!(ReadArgs { session, tab });`.
macro_rules! shared_fields {
    ($args:ty { $($field:ident),* }) => {
        impl $crate::tools::call::Shared for $args {
            $( shared_fields!(@ $field); )*
        }
    };
    (@ session) => {
        fn session(&self) -> Option<&str> {
            self.session.as_ref().map(|name| name.0.as_str())
        }
    };
    (@ tab) => {
        fn tab(&self) -> Option<&str> {
            self.tab.as_deref()
        }
    };
    (@ timeout_ms) => {
        fn timeout_ms(&self) -> Option<u64> {
            self.timeout_ms.as_ref().map(|ms| ms.0)
        }
    };
}

/// One tool call in progress: what the tool may ask of its surroundings.
pub struct Call<'a> {
    pub ctx: &'a Ctx,
    /// Whose call it is: its sessions, files, policy and limits.
    tenant: Arc<Tenant>,
    /// The call's span, whatever span a tool may have entered meanwhile.
    span: tracing::Span,
    /// Where the caller reached the service, and where it hears of hand-offs.
    origin: Option<String>,
    progress: Option<tokio::sync::mpsc::UnboundedSender<super::HandoffProgress>>,
    task_progress: Option<tokio::sync::mpsc::UnboundedSender<super::TaskProgress>>,
    opener: Option<Arc<dyn super::LinkOpener>>,
    session_name: SessionName,
    requested_tab: Option<String>,
    /// When the call must be done (`timeout_ms` after it started, or the tool's default).
    ends: Instant,
    /// When it must be done if it turns out to wait for a person, unless `timeout_ms` said.
    person_ends: Option<Instant>,
    guard: Option<SessionGuard>,
    /// The tab the call worked in, named in the reply.
    used_tab: Option<String>,
    images: Vec<Image>,
    file: Option<Image>,
    saved: Vec<std::path::PathBuf>,
    /// The element the call's action is about to act on, for the session's trace.
    target: Option<crate::browser::ElementIdentity>,
    /// Whether the caller gets page text in marked blocks by default.
    boundaries: bool,
}

impl<'a> Call<'a> {
    /// The tenant the call runs for.
    pub fn tenant(&self) -> &Arc<Tenant> {
        &self.tenant
    }

    /// What the call may reach: its tenant's policy.
    pub fn policy(&self) -> &UrlPolicy {
        self.tenant.policy()
    }

    /// Whether page text goes back in marked blocks: as the call asks, else as its caller and
    /// the configuration say.
    pub fn bounded(&self, asked: Option<bool>) -> bool {
        asked.unwrap_or(self.boundaries)
    }

    /// What is left of the call's time limit (`timeout_ms`, or the tool's default): a wait for
    /// the session, or in the admission queue, has used up the rest.
    pub fn time_left(&self) -> Duration {
        self.ends.saturating_duration_since(Instant::now())
    }

    /// When the call must be done.
    pub fn ends(&self) -> Instant {
        self.ends
    }

    /// The call turned out to wait for a person (its client's user was asked): without a
    /// `timeout_ms` of its own it gets a hand-off's time.
    pub fn waiting_for_person(&mut self) {
        if let Some(ends) = self.person_ends.take() {
            self.ends = self.ends.max(ends);
        }
    }

    /// Gives the call `extra` time past its limit: to report on a wait that used it all.
    pub fn extend(&mut self, extra: Duration) {
        self.ends = self.ends.max(Instant::now()) + extra;
    }

    /// The session the call runs in.
    pub fn session_name(&self) -> &SessionName {
        &self.session_name
    }

    /// A link that opens the live view of the call's session, without the API token.
    pub fn live_link(&self) -> ToolResult<LiveLink> {
        let (token, grant) = self.ctx.live_links.mint(&SessionId::new(
            self.tenant.name().clone(),
            self.session_name.clone(),
        ));
        let url = self
            .ctx
            .public_url
            .live_url(self.origin.as_deref(), self.session_name.as_str(), &token)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotConfigured,
                    "webpilot does not know its own address to link to",
                )
                .with_hint("start it with --public-url (WEBPILOT_PUBLIC_URL)")
            })?;
        Ok(LiveLink {
            live_url: url,
            expires_at: crate::tenancy::links::rfc3339(grant.expires_at),
        })
    }

    /// Tells the front a hand-off is waiting for a person.
    pub fn report(&self, progress: super::HandoffProgress) {
        if let Some(sender) = &self.progress {
            let _ = sender.send(progress);
        }
    }

    /// How the caller's client opens links for its user, when it can.
    pub fn link_opener(&self) -> Option<Arc<dyn super::LinkOpener>> {
        self.opener.clone()
    }

    /// Tells the front how far a task the call waits on got.
    pub fn report_task(&self, progress: super::TaskProgress) {
        if let Some(sender) = &self.task_progress {
            let _ = sender.send(progress);
        }
    }

    /// Lets go of the session's command lock (a person may take it) until `session` is called
    /// again.
    pub fn release_session(&mut self) {
        self.guard = None;
    }

    /// The call's browser session, opened (and its command lock taken) on first use.
    pub async fn session(&mut self) -> ToolResult<&mut SessionGuard> {
        let guard = match self.guard.take() {
            Some(guard) => guard,
            None => {
                let browser = &self.ctx.browser;
                browser
                    .session(&self.tenant, &self.session_name, self.ends)
                    .await?
            }
        };
        Ok(self.guard.insert(guard))
    }

    /// The session's live side, for a call that waits for a person: the session is taken as
    /// `session` takes it, unless a person has control of it (now, or while the call waits for
    /// its turn). Then the call, which is for that person, goes on without the session
    /// (`holds_session` says so) and `session` takes it later.
    pub async fn live_side(&mut self) -> ToolResult<Arc<LiveHub>> {
        if let Some(guard) = &self.guard {
            return Ok(guard.live().clone());
        }
        let browser = &self.ctx.browser;
        let turn = browser
            .session_or_person(&self.tenant, &self.session_name, self.ends)
            .await?;
        Ok(match turn {
            Turn::Agent(guard) => self.guard.insert(guard).live().clone(),
            Turn::Person(hub) => hub,
        })
    }

    /// Whether the call holds its session's command lock now.
    pub fn holds_session(&self) -> bool {
        self.guard.is_some()
    }

    /// The tab to navigate: the one the call names, or the active one; a tab whose renderer
    /// crashed is replaced first. Returns the crashed page's URL with it, if it was replaced.
    pub async fn tab_to_navigate(&mut self) -> ToolResult<(&mut Tab, Option<String>)> {
        let id = self.tab().await?.id.clone();
        let session = self.session().await?;
        let crashed_url = session.replace_if_crashed(&id).await?;
        Ok((self.use_tab(&id)?, crashed_url))
    }

    /// The tab the call names (`tab`), or the session's active tab (opened if there is none).
    pub async fn tab(&mut self) -> ToolResult<&mut Tab> {
        let requested = self.requested_tab.clone();
        let session = self.session().await?;
        let id = session
            .tab_or_active(requested.as_deref())
            .await?
            .id
            .clone();
        self.use_tab(&id)
    }

    /// A new tab, which becomes the active one and the call's tab.
    pub async fn new_tab(&mut self) -> ToolResult<&mut Tab> {
        let id = self.session().await?.open_tab().await?.id.clone();
        self.use_tab(&id)
    }

    /// Makes tab `id` of the open session the one the reply names.
    pub fn use_tab(&mut self, id: &str) -> ToolResult<&mut Tab> {
        self.span.record("tab", id);
        self.used_tab = Some(id.to_string());
        let guard = self
            .guard
            .as_mut()
            .ok_or_else(|| ToolError::internal("no session is open in this call"))?;
        guard.tab(id)
    }

    /// Adds an image to the result, for fronts that show images.
    pub fn image(&mut self, mime: &'static str, data: Vec<u8>) {
        self.images.push(Image { mime, data });
    }

    /// Whether the call opened (or found) its session.
    pub(super) fn opened_session(&self) -> bool {
        self.guard.is_some()
    }

    /// The tab the call worked in (else the active one), while the call holds its session.
    pub(super) fn worked_tab(&mut self) -> Option<&mut Tab> {
        let guard = self.guard.as_mut()?;
        let id = self
            .used_tab
            .clone()
            .or_else(|| guard.active_id().map(str::to_string))?;
        guard.tab(&id).ok()
    }

    /// What a person did through the live view since the session's last call, taken.
    pub(super) fn person_inputs(&self) -> Vec<crate::browser::live::PersonInput> {
        self.guard
            .as_ref()
            .map(|guard| guard.live().take_person_inputs())
            .unwrap_or_default()
    }

    /// The element noted by `note_target`, taken.
    pub(super) fn take_target(&mut self) -> Option<crate::browser::ElementIdentity> {
        self.target.take()
    }

    /// Notes the element the action is about to act on (for the session's trace).
    pub fn note_target(&mut self, target: Option<crate::browser::ElementIdentity>) {
        self.target = target;
    }

    /// Offers a file the tool wrote to a REST client that asks for `mime`.
    pub fn attach_file(&mut self, mime: &'static str, data: Vec<u8>) {
        self.file = Some(Image { mime, data });
    }

    /// Notes a file the call wrote for the caller, for fronts that link to saved files.
    pub fn wrote(&mut self, path: std::path::PathBuf) {
        self.saved.push(path);
    }

    /// Where the call ran: the session, and the tab it used (else the active one) with its
    /// URL and title, when the session was opened and the tab is still there. `lean` (an
    /// action's result) leaves out what the session's previous result already said and the
    /// `default` session.
    async fn place(&mut self, lean: bool) -> Place {
        let default = self.session_name == SessionName::default_session();
        let mut place = Place {
            session: (!lean || !default).then(|| self.session_name.to_string()),
            tab: None,
            url: None,
            title: None,
            blocked: Vec::new(),
            queued_ms: None,
        };
        let Some(guard) = self.guard.as_mut() else {
            return place;
        };
        place.blocked = guard.take_blocked();
        let queued = guard.queued();
        place.queued_ms = (queued >= REPORTED_WAIT).then_some(queued.as_millis() as u64);
        let Some(tab) = self.worked_tab() else {
            return place;
        };
        let now = Told {
            tab: tab.id.clone(),
            url: tab.url().await,
            title: tab.title().await,
        };
        let before = self
            .guard
            .as_mut()
            .and_then(|guard| guard.retell(now.clone()));
        let same_tab = before
            .as_ref()
            .filter(|before| lean && before.tab == now.tab);
        place.tab = Some(now.tab).filter(|_| same_tab.is_none());
        place.url = Some(now.url).filter(|url| same_tab.is_none_or(|b| &b.url != url));
        place.title = Some(now.title).filter(|title| same_tab.is_none_or(|b| &b.title != title));
        place
    }
}

/// A link to a session's live view.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LiveLink {
    /// Opens the session's live view (no API token needed).
    pub live_url: String,
    /// When the link stops working (RFC 3339); an open live view renews it.
    pub expires_at: String,
}

/// Where a browser call ran; every browser tool's result starts with these fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Place {
    /// The browser session the call ran in (an action's result leaves out `default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The tab the call acted in (or the active tab).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tab: Option<String>,
    /// That tab's URL after the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// That tab's title after the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Connections of the session's pages (any tab, frame or worker) that the URL policy
    /// refused since its previous call: images, fetches, frames, WebSockets, popups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Blocked>,
    /// How long the call waited for its turn to create a browser context or tab (the browser
    /// was busy), when that was 100 ms or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
}

/// A browser tool's result.
#[derive(Serialize, JsonSchema)]
struct BrowserReply<O> {
    #[serde(flatten)]
    place: Place,
    #[serde(flatten)]
    output: O,
    /// Time the call took, in milliseconds.
    elapsed_ms: u64,
}

/// A web or task tool's result.
#[derive(Serialize, JsonSchema)]
struct Reply<O> {
    #[serde(flatten)]
    output: O,
    /// Time the call took, in milliseconds.
    elapsed_ms: u64,
}

/// The published schema of tool `T`'s successful result.
pub(super) fn output_schema<T: Tool>() -> Value {
    match T::SCOPE {
        Scope::Browser => schema::output::<BrowserReply<T::Output>>(),
        Scope::Web | Scope::Task => schema::output::<Reply<T::Output>>(),
    }
}

/// The object-safe face of a `Tool`, as the registry stores it.
#[async_trait]
pub(super) trait DynTool: Send + Sync {
    fn name(&self) -> &'static str;
    fn spec(&self) -> ToolSpec;
    async fn call(
        &self,
        ctx: &Ctx,
        metrics: &Metrics,
        args: Value,
        caller: &Caller,
    ) -> ToolResult<ToolOutput>;
}

#[async_trait]
impl<T: Tool> DynTool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec::of::<T>()
    }

    async fn call(
        &self,
        ctx: &Ctx,
        metrics: &Metrics,
        args: Value,
        caller: &Caller,
    ) -> ToolResult<ToolOutput> {
        let span = tracing::info_span!(
            "tool",
            tool = T::NAME,
            tenant = caller.tenant.label(),
            session = Empty,
            tab = Empty
        );
        let started = Instant::now();
        let (result, timings) = crate::timing::recorded(
            respond(self, ctx, args, caller, started, span.clone()).instrument(span.clone()),
        )
        .await;
        let result = result.map(|output| ToolOutput { timings, ..output });
        let elapsed = started.elapsed();
        let elapsed_ms = elapsed.as_millis() as u64;
        let outcome = span.in_scope(|| match &result {
            Ok(_) => {
                tracing::info!(elapsed_ms, "tool call done");
                "ok".to_string()
            }
            Err(e) => {
                tracing::info!(elapsed_ms, code = ?e.code, "tool call failed");
                e.code.name()
            }
        });
        metrics.record(T::NAME, &outcome, elapsed.as_secs_f64());
        result
    }
}

/// The steps of one call, inside its span.
async fn respond<T: Tool>(
    tool: &T,
    ctx: &Ctx,
    args: Value,
    caller: &Caller,
    started: Instant,
    span: tracing::Span,
) -> ToolResult<ToolOutput> {
    // What the session's trace keeps of the call: its arguments as sent.
    let traced = (T::SCOPE == Scope::Browser && ctx.traces.enabled()).then(|| args.clone());
    let (verbose, args) = take_verbose(T::NAME, args)?;
    let args = parse_args::<T::Args>(T::NAME, args)?;
    let lean = T::acts(&args) && !(verbose || ctx.config.results.verbose);
    // The front's own session (an MCP connection's) may be a reserved name; the caller's not.
    let session_name = SessionName::choose(args.session(), caller.session.as_ref())?;
    if T::SCOPE == Scope::Browser {
        span.record("session", session_name.as_str());
    }
    let (default_ms, max_ms) = if args.waits_for_person() {
        (PERSON_WAIT_MS, MAX_PERSON_WAIT_MS)
    } else {
        let default_ms = T::DEFAULT_TIMEOUT_MS.unwrap_or(ctx.config.navigation_timeout_ms);
        (default_ms, MAX_TIMEOUT_MS)
    };
    let mut call = Call {
        ctx,
        tenant: caller.tenant.clone(),
        span,
        origin: caller.origin.clone(),
        progress: caller.progress.clone(),
        task_progress: caller.task_progress.clone(),
        opener: caller.opener.clone(),
        session_name,
        requested_tab: args.tab().map(str::to_string),
        ends: started + deadline(args.timeout_ms(), default_ms, max_ms)?,
        person_ends: (args.timeout_ms().is_none())
            .then(|| started + Duration::from_millis(PERSON_WAIT_MS)),
        guard: None,
        used_tab: None,
        images: Vec::new(),
        file: None,
        saved: Vec::new(),
        target: None,
        boundaries: caller.boundaries || ctx.config.content_boundaries,
    };
    let result = finish::<T>(tool.run(&mut call, args).await, &mut call, started, lean).await;
    if let Some(arguments) = traced {
        traced::record(&mut call, T::NAME, arguments, &result, started).await;
    }
    result
}

/// A tool's output as every front sees it: the JSON reply (with the place for browser tools),
/// images and files.
async fn finish<T: Tool>(
    output: ToolResult<T::Output>,
    call: &mut Call<'_>,
    started: Instant,
    lean: bool,
) -> ToolResult<ToolOutput> {
    let output = output?;
    let summary = T::summary(&output);
    let json = match T::SCOPE {
        Scope::Browser => {
            let place = call.place(lean).await;
            let elapsed_ms = started.elapsed().as_millis() as u64;
            to_object(&BrowserReply {
                place,
                output,
                elapsed_ms,
            })?
        }
        Scope::Web | Scope::Task => to_object(&Reply {
            output,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })?,
    };
    Ok(ToolOutput {
        json,
        images: std::mem::take(&mut call.images),
        file: call.file.take(),
        saved: std::mem::take(&mut call.saved),
        summary,
        timings: Default::default(),
    })
}

fn to_object(reply: &impl Serialize) -> ToolResult<Value> {
    match serde_json::to_value(reply) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Ok(Value::Object(Map::new())),
        Err(e) => Err(ToolError::internal(format!(
            "cannot encode the result: {e}"
        ))),
    }
}

/// `timeout_ms` if given and within bounds, else the default: one rule for every tool.
fn deadline(requested: Option<u64>, default_ms: u64, max: u64) -> ToolResult<Duration> {
    let min = MIN_TIMEOUT_MS;
    match requested {
        Some(ms) if !(min..=max).contains(&ms) => Err(ToolError::invalid(format!(
            "field `timeout_ms` must be between {min} and {max}, got {ms}"
        ))),
        Some(ms) => Ok(Duration::from_millis(ms)),
        None => Ok(Duration::from_millis(default_ms)),
    }
}

/// `verbose` taken out of the arguments (every tool takes it, unpublished so the tool list
/// stays small): `true` asks an action's result to say where the session is in full.
fn take_verbose(tool: &str, args: Value) -> ToolResult<(bool, Value)> {
    let Value::Object(mut fields) = args else {
        return Ok((false, args));
    };
    match fields.remove("verbose") {
        None | Some(Value::Null) => Ok((false, Value::Object(fields))),
        Some(Value::Bool(verbose)) => Ok((verbose, Value::Object(fields))),
        Some(other) => Err(ToolError::invalid(format!(
            "{tool}: field `verbose` must be true or false, got {other}"
        ))),
    }
}

/// Parses arguments, naming the offending field in the error.
fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> ToolResult<A> {
    let args = match args {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if !args.is_object() {
        return Err(ToolError::invalid(format!(
            "arguments of {tool} must be a JSON object"
        )));
    }
    serde_path_to_error::deserialize(args).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        let message = if path == "." {
            format!("{tool}: {inner}")
        } else {
            format!("{tool}: field `{path}`: {inner}")
        };
        ToolError::invalid(message)
            .with_hint(format!("GET /api/tools shows the parameters of {tool}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_timeout_rule() {
        assert_eq!(
            deadline(None, 15_000, MAX_TIMEOUT_MS).unwrap(),
            Duration::from_secs(15)
        );
        assert_eq!(
            deadline(Some(100), 1, MAX_TIMEOUT_MS).unwrap(),
            Duration::from_millis(100)
        );
        assert_eq!(
            deadline(Some(3_600_000), 1, MAX_PERSON_WAIT_MS).unwrap(),
            Duration::from_secs(3_600)
        );
        assert!(deadline(Some(3_600_001), 1, MAX_PERSON_WAIT_MS).is_err());
        for bad in [0, 99, 120_001] {
            let error = deadline(Some(bad), 15_000, MAX_TIMEOUT_MS).unwrap_err();
            assert!(
                error.message.contains("between 100 and 120000"),
                "{error:?}"
            );
        }
    }
}
