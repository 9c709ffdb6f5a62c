//! The live view: `GET /live/{session}?cap=…` (the page, compiled in) and its WebSocket
//! `GET /live/{session}/ws?cap=…`, which streams the session's tabs, frames of the tab shown and
//! the open hand-off, and takes the person's control messages and input.
//!
//! Both need a capability link for that session (`capability.rs`), whatever the bearer token:
//! a link can be given to a person without the token. The WebSocket also needs an `Origin`
//! of this service, so that no other site's page can drive a session with a leaked link.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use futures::{FutureExt, SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::browser::TabInfo;
use crate::browser::live::{
    Control, HandoffState, LiveHub, LiveTab, LiveTabs, RemoteInput, Watching,
};
use crate::error::ToolResult;
use crate::ids::SessionId;
use crate::tenancy::links::{Grant, Refusal};

const PAGE: &str = include_str!("live.html");
/// How long "Take control" waits for the agent's current call to end.
const TAKE_WAIT: Duration = Duration::from_secs(60);
/// How often the tabs' URLs and titles are refreshed (and a person's popups adopted).
const REFRESH: Duration = Duration::from_secs(1);

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/live/{session}", get(page))
        .route("/live/{session}/ws", get(socket))
        .with_state(app)
}

#[derive(Deserialize)]
struct Link {
    cap: Option<String>,
}

/// Why a live-view request is refused: the status and the sentence shown to the person.
type Refused = (StatusCode, &'static str);

/// Where the session a link opens is.
enum Admitted {
    /// Here: the link's session and its live hub.
    Here(SessionId, Arc<LiveHub>),
    /// In another instance, reached at this URL.
    Elsewhere(String),
}

/// Where the session a link opens is, or why it does not open.
async fn admit(app: &App, session: &str, link: &Link) -> Result<Admitted, Refused> {
    let Some(cap) = link.cap.as_deref() else {
        return Err((
            StatusCode::FORBIDDEN,
            "This page opens only through a live-view link (browser_tabs action=live gives one).",
        ));
    };
    let grant: Grant = app
        .live_links
        .check(cap, session)
        .map_err(|refusal: Refusal| (StatusCode::FORBIDDEN, refusal.explain()))?;
    // A link of a tenant whose key is gone opens nothing.
    app.tenants
        .named(&grant.session.tenant)
        .ok_or((StatusCode::FORBIDDEN, Refusal::Forged.explain()))?;
    if let Some(hub) = app.browser.live(&grant.session) {
        return Ok(Admitted::Here(grant.session, hub));
    }
    if let Some(cluster) = &app.cluster
        && let Ok(Some(holder)) = cluster.elsewhere(&grant.session).await
    {
        return Ok(Admitted::Elsewhere(holder));
    }
    Err((
        StatusCode::NOT_FOUND,
        "This session is not open any more. Ask for a new link once it is.",
    ))
}

async fn page(
    State(app): State<App>,
    Path(session): Path<String>,
    Query(link): Query<Link>,
) -> Response {
    // The page is the same on every instance: its WebSocket finds the session.
    if let Err((status, text)) = admit(&app, &session, &link).await {
        return plain_page(status, text);
    }
    let mut response = Html(PAGE).into_response();
    protect(response.headers_mut());
    response
}

/// The link is in the URL: it must not leak through a referrer or a cache; the page runs its
/// own script only, and only this service may frame it (the console).
fn protect(headers: &mut HeaderMap) {
    static POLICY: LazyLock<header::HeaderValue> = LazyLock::new(|| {
        let policy = format!(
            "default-src 'none'; script-src {}; style-src 'unsafe-inline'; img-src blob:; \
             connect-src 'self'; frame-ancestors 'self'; base-uri 'none'",
            super::console::own_script(PAGE)
        );
        header::HeaderValue::from_str(&policy).expect("an ASCII policy")
    });
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    for (name, value) in set {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
    headers.insert(header::CONTENT_SECURITY_POLICY, POLICY.clone());
}

fn plain_page(status: StatusCode, text: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>webpilot live view</title><p>{text}</p>"
    );
    let mut response = (status, Html(body)).into_response();
    protect(response.headers_mut());
    response
}

async fn socket(
    State(app): State<App>,
    Path(session): Path<String>,
    Query(link): Query<Link>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let admitted = match admit(&app, &session, &link).await {
        Ok(admitted) => admitted,
        Err((status, text)) => return plain_page(status, text),
    };
    if !own_origin(&app, &headers) {
        return plain_page(
            StatusCode::FORBIDDEN,
            "The live view's connection must come from webpilot's own page.",
        );
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let (session, hub) = match admitted {
        Admitted::Here(session, hub) => (session, hub),
        Admitted::Elsewhere(holder) => {
            let cap = link.cap.unwrap_or_default();
            return upgrade
                .on_upgrade(move |socket| super::live_relay::relay(socket, holder, session, cap));
        }
    };
    upgrade.on_upgrade(move |socket| {
        let viewer = Viewer {
            app,
            session,
            hub,
            shown: None,
            watching: None,
            control: None,
            taking: None,
            last_state: Value::Null,
            last_size: (0.0, 0.0),
            handoff: None,
        };
        viewer.run(socket)
    })
}

/// Whether the upgrade's `Origin` is this service as the request reached it, or its public URL.
fn own_origin(app: &App, headers: &HeaderMap) -> bool {
    let Some(origin) = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| url::Url::parse(v).ok())
    else {
        return false;
    };
    let authority = |url: &url::Url| {
        url.host_str()
            .map(|host| match url.port_or_known_default() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            })
    };
    let Some(origin) = authority(&origin) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|host| url::Url::parse(&format!("http://{host}")).ok())
        .and_then(|url| authority(&url));
    let public = app
        .config
        .public_url
        .as_deref()
        .and_then(|public| url::Url::parse(public).ok())
        .and_then(|url| authority(&url));
    [host, public]
        .into_iter()
        .flatten()
        .any(|own| own == origin)
}

/// What the viewer's page sends.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FromViewer {
    Take,
    GiveBack,
    Done,
    /// A person's answer to an action held for them.
    Answer {
        id: String,
        allow: bool,
    },
    Tab {
        tab: String,
    },
    Input {
        event: RemoteInput,
    },
}

/// One connected viewer.
struct Viewer {
    app: App,
    session: SessionId,
    hub: Arc<LiveHub>,
    /// The tab the person chose to see; None follows the session's active tab.
    shown: Option<String>,
    /// The tab whose frames this viewer gets.
    watching: Option<(LiveTab, Watching)>,
    control: Option<Control>,
    /// "Take control" waiting for the agent's current call.
    taking: Option<BoxFuture<'static, ToolResult<Control>>>,
    last_state: Value,
    last_size: (f64, f64),
    /// The last hand-off this viewer saw: its message, and how it ended.
    handoff: Option<(String, Option<Value>)>,
}

impl Viewer {
    async fn run(mut self, socket: WebSocket) {
        let app = self.app.clone();
        let _viewing = self.hub.viewer();
        let (mut sink, mut stream) = socket.split();
        let mut tabs = self.hub.tabs();
        let mut handoff = self.hub.handoff();
        let mut questions = self.hub.confirmations().subscribe();
        let mut refresh = tokio::time::interval(REFRESH);
        let renew_every = (app.live_links.lifetime() / 3).max(Duration::from_secs(1));
        let mut renew =
            tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
        self.follow_tabs().await;
        if let Some(state) = self.state_if_changed().await
            && sink.send(state).await.is_err()
        {
            return;
        }
        loop {
            let mut outgoing = Vec::new();
            // Frames alone change nothing else; anything but a frame may have.
            let mut changed = true;
            tokio::select! {
                message = stream.next() => match message {
                    Some(Ok(Message::Text(text))) => {
                        changed = self.on_message(&text, &mut outgoing).await;
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
                frame = next_frame(&mut self.watching) => match frame {
                    Some(frame) => {
                        changed = false;
                        self.show_frame(&frame, &mut outgoing);
                    }
                    None => self.watching = None,
                },
                Ok(()) = tabs.changed() => self.follow_tabs().await,
                Ok(()) = questions.changed() => {}
                Ok(()) = handoff.changed() => {
                    // The hand-off is over: a person's control goes with it, the agent goes on.
                    if !matches!(&*handoff.borrow_and_update(), HandoffState::Open(_)) {
                        self.control = None;
                        self.taking = None;
                    }
                }
                taken = take(&mut self.taking) => {
                    self.taking = None;
                    match taken {
                        Ok(control) => self.control = Some(control),
                        Err(error) => outgoing.push(notice(&error.message)),
                    }
                }
                _ = refresh.tick() => {
                    if !self.refresh().await {
                        let _ = sink.send(notice("The session has closed.")).await;
                        break;
                    }
                }
                _ = renew.tick() => outgoing.push(self.renewed_link()),
                () = app.stop.cancelled() => break,
            }
            if changed && let Some(state) = self.state_if_changed().await {
                outgoing.push(state);
            }
            for message in outgoing {
                if sink.send(message).await.is_err() {
                    return;
                }
            }
        }
    }

    /// A frame for the page, after its size when that changed.
    fn show_frame(&mut self, frame: &crate::browser::live::Frame, outgoing: &mut Vec<Message>) {
        if (frame.width, frame.height) != self.last_size {
            self.last_size = (frame.width, frame.height);
            outgoing.push(Message::Text(text(json!({
                "type": "size", "width": frame.width, "height": frame.height,
            }))));
        }
        outgoing.push(Message::Binary(frame.jpeg.clone().into()));
    }

    /// Whether the session is still the one this viewer watches; a person's control keeps it
    /// from being reaped and its tabs current.
    async fn refresh(&mut self) -> bool {
        let still_live = self
            .app
            .browser
            .live(&self.session)
            .is_some_and(|hub| Arc::ptr_eq(&hub, &self.hub));
        if still_live && let Some(control) = self.control.as_mut() {
            control.touch();
            let _ = control.sync_tabs().await;
        }
        still_live
    }

    /// A fresh link for the page to keep (the one it was opened with expires).
    fn renewed_link(&self) -> Message {
        let (cap, grant) = self.app.live_links.mint(&self.session);
        Message::Text(text(json!({
            "type": "link", "cap": cap,
            "expires_at": crate::tenancy::links::rfc3339(grant.expires_at),
        })))
    }

    /// Handles one message of the viewer's page; returns whether the viewer's state may have
    /// changed (input, many a second while a person drives, changes none of it).
    async fn on_message(&mut self, message: &str, outgoing: &mut Vec<Message>) -> bool {
        let message: FromViewer = match serde_json::from_str(message) {
            Ok(message) => message,
            Err(error) => {
                outgoing.push(notice(&format!("not understood: {error}")));
                return false;
            }
        };
        match message {
            FromViewer::Take => {
                if self.control.is_none() && self.taking.is_none() {
                    let (browser, session) = (self.app.browser.clone(), self.session.clone());
                    let deadline = Instant::now() + TAKE_WAIT;
                    self.taking =
                        Some(async move { browser.take_control(&session, deadline).await }.boxed());
                }
            }
            FromViewer::GiveBack => {
                self.control = None;
                self.taking = None;
            }
            FromViewer::Done => {
                self.hub.done();
                self.control = None;
                self.taking = None;
            }
            FromViewer::Answer { id, allow } => {
                if !self.hub.confirmations().answer(&id, allow) {
                    outgoing.push(notice("That question was answered already or has lapsed."));
                }
            }
            FromViewer::Tab { tab } => {
                if let Some(control) = self.control.as_mut()
                    && let Err(error) = control.switch_to(&tab)
                {
                    outgoing.push(notice(&error.message));
                    return true;
                }
                self.shown = Some(tab);
                self.follow_tabs().await;
            }
            FromViewer::Input { event } => {
                // Input goes to the tab on the person's screen.
                if let (Some(control), Some((tab, _))) = (&self.control, &self.watching)
                    && let Err(error) = self.hub.input(control, tab, event).await
                {
                    outgoing.push(notice(&error.message));
                }
                return false;
            }
        }
        true
    }

    /// Watches the tab to show now (the chosen one, else the session's active tab).
    async fn follow_tabs(&mut self) {
        let tabs: LiveTabs = self.hub.tabs().borrow().clone();
        let Some(tab) = tabs.shown(self.shown.as_deref()) else {
            self.watching = None;
            return;
        };
        if self
            .watching
            .as_ref()
            .is_some_and(|(watched, _)| watched.is(tab))
        {
            return;
        }
        self.last_size = (0.0, 0.0);
        self.watching = match self.hub.watch(tab).await {
            Ok(watching) => Some((tab.clone(), watching)),
            Err(error) => {
                tracing::debug!(message = %error.message, "cannot watch a tab");
                None
            }
        };
    }

    /// The viewer's state (tabs, what it shows, control, hand-off), when it changed.
    async fn state_if_changed(&mut self) -> Option<Message> {
        let tabs: LiveTabs = self.hub.tabs().borrow().clone();
        let infos: Vec<TabInfo> = tabs.infos().await;
        let control = match (&self.control, &self.taking) {
            (Some(_), _) => "you",
            (None, Some(_)) => "waiting",
            (None, None) if self.hub.controlled() => "other",
            (None, None) => "none",
        };
        // A hand-off's end stays on screen after the agent took it up (the state is then None).
        self.handoff = match (&*self.hub.handoff().borrow(), self.handoff.take()) {
            (HandoffState::Open(h), _) => Some((h.message.clone(), None)),
            (HandoffState::Ended(h, outcome), _) => Some((h.message.clone(), Some(json!(outcome)))),
            (HandoffState::None, Some((message, None))) => Some((message, Some(json!("ended")))),
            (HandoffState::None, seen) => seen,
        };
        let (handoff, ended) = match &self.handoff {
            None => (Value::Null, Value::Null),
            Some((message, ended)) => (json!({ "message": message }), json!(ended)),
        };
        let state = json!({
            "type": "state",
            "session": self.session.name,
            "tabs": infos,
            "shown": self.watching.as_ref().map(|(tab, _)| &tab.id),
            "control": control,
            "handoff": handoff,
            "ended": ended,
            "questions": self.hub.confirmations().open(),
        });
        if state == self.last_state {
            return None;
        }
        self.last_state = state.clone();
        Some(Message::Text(text(state)))
    }
}

async fn next_frame(
    watching: &mut Option<(LiveTab, Watching)>,
) -> Option<Arc<crate::browser::live::Frame>> {
    match watching {
        Some((_, watching)) => watching.next().await,
        None => std::future::pending().await,
    }
}

async fn take(taking: &mut Option<BoxFuture<'static, ToolResult<Control>>>) -> ToolResult<Control> {
    match taking {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

fn notice(message: &str) -> Message {
    Message::Text(text(json!({ "type": "notice", "message": message })))
}

fn text(value: Value) -> Utf8Bytes {
    value.to_string().into()
}
