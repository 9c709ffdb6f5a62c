//! Frames a tab's top document cannot script: out-of-process frames of other sites (their own
//! CDP targets under site isolation) and same-process frames of another origin.
//!
//! Out-of-process frames are reached through the link (`link.rs`): each tab attaches to its page
//! target a second time and asks Chromium to auto-attach its iframes, paused until they are set
//! up like the tab itself — the page agent, the URL guard on their documents, JS dialog answers,
//! network tracking for readiness — and recursively for frames inside them.
//!
//! Every foreign frame is known by its frame id (its `key`). Before its parent document is read,
//! the frame's owner element (`<iframe>`) is tagged with that key, so the parent's agent can mark
//! the frame's place in document order and its box; the tab then reads the frame and splices it
//! in there (`snapshot.rs`, `content.rs`).

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::{GetFrameOwnerParams, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::page::{AddScriptToEvaluateOnNewDocumentParams, FrameId};
use chromiumoxide::cdp::browser_protocol::target::{
    AttachToTargetParams, FilterEntry, SetAutoAttachParams, TargetFilter,
};
use chromiumoxide::cdp::events::CdpEvent;
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, ExecutionContextId, RunIfWaitingForDebuggerParams,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame_traffic::Traffic;
use super::guard::DocumentGuard;
use super::link::{CdpLink, CdpTarget, LinkEvent};
use super::observe::{Origin, TabLog};
use super::pool::BrowserHandle;
use super::tab::{AGENT_JS, TabEvents, lock};
use super::watcher::answer_dialog;
use crate::error::ToolResult;

/// A document of the tab the tools can read and act in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Doc {
    /// The tab's top document (and every same-origin frame inside it, which its agent walks).
    Top,
    /// A frame of the page's own process that the top document may not script (another origin
    /// of the same site), evaluated in its execution context.
    Context {
        frame: String,
        context: ExecutionContextId,
    },
    /// An out-of-process frame, reached through its own session on the link.
    Remote { frame: String, session: String },
}

impl Doc {
    /// The frame id of a foreign frame; `None` for the top document.
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            Doc::Top => None,
            Doc::Context { frame, .. } | Doc::Remote { frame, .. } => Some(frame),
        }
    }
}

/// Where a document's `<iframe>` elements live: `None` for the tab's own page target, else the
/// session of an out-of-process frame.
pub(crate) type Holder = Option<String>;

/// One out-of-process frame attached under the tab.
#[derive(Debug, Clone)]
struct RemoteFrame {
    session: String,
    frame: String,
    /// The target that holds the frame's `<iframe>` element.
    parent: Holder,
}

impl RemoteFrame {
    fn doc(&self) -> Doc {
        Doc::Remote {
            frame: self.frame.clone(),
            session: self.session.clone(),
        }
    }
}

/// What the frame watcher and the tab share about out-of-process frames.
#[derive(Default)]
struct Registry {
    frames: Vec<RemoteFrame>,
    /// Workers of the page and its frames, by session: their script URL.
    workers: HashMap<String, String>,
    /// Owner elements already tagged with their frame's key, by frame id, with the owner's
    /// object id (valid in the owner's session) for positioning.
    owners: HashMap<String, String>,
}

/// The foreign frames of one tab.
pub(crate) struct Frames {
    page: Page,
    /// The tab's page attached a second time on the link; `None` when the browser offers no
    /// second connection to the same browser (then out-of-process frames stay out of reach).
    linked: Option<Linked>,
    registry: Arc<Mutex<Registry>>,
}

/// The tab's page session on the link and the task following its frames.
struct Linked {
    link: Arc<CdpLink>,
    page_session: String,
    route: mpsc::UnboundedSender<LinkEvent>,
    watcher: JoinHandle<()>,
}

impl Drop for Linked {
    fn drop(&mut self) {
        self.link.unroute(&self.route);
        self.watcher.abort();
    }
}

/// Scripts the session runs in every document of a tab before the page's own (restored
/// storage); frames attached later get them too.
pub(crate) type InitScripts = Arc<Mutex<Vec<String>>>;

impl Frames {
    /// Attaches to the tab's page target on the link and starts following its frames. Without
    /// the link (or when the link reaches another browser, as some browser services open one
    /// per connection) the tab works on, without out-of-process frames.
    pub(crate) async fn attach(
        browser: &BrowserHandle,
        page: &Page,
        guard: Arc<DocumentGuard>,
        events: Arc<Mutex<TabEvents>>,
        log: Arc<Mutex<TabLog>>,
        scripts: InitScripts,
    ) -> Self {
        let registry = Arc::new(Mutex::new(Registry::default()));
        let watched = Watched {
            registry: registry.clone(),
            events,
            log,
            guard,
            scripts,
        };
        let linked = match &browser.link {
            Some(link) => Linked::attach(browser, link, page, watched)
                .await
                .inspect_err(|error| {
                    tracing::warn!(message = %error.message, "frames of other sites are out of reach");
                })
                .ok(),
            None => None,
        };
        Self {
            page: page.clone(),
            linked,
            registry,
        }
    }

    /// Where commands for documents held by `holder` go.
    pub(crate) fn target(&self, holder: &Holder) -> CdpTarget {
        match (holder, &self.linked) {
            (Some(session), Some(linked)) => {
                CdpTarget::Session(linked.link.clone(), session.clone())
            }
            _ => CdpTarget::Page(self.page.clone()),
        }
    }

    /// Where `Page.navigate` goes: straight to the page on the link (chromiumoxide would queue
    /// it behind the previous navigation's `load`), else through chromiumoxide.
    pub(crate) fn navigation_target(&self) -> CdpTarget {
        match &self.linked {
            Some(linked) => CdpTarget::Session(linked.link.clone(), linked.page_session.clone()),
            None => CdpTarget::Page(self.page.clone()),
        }
    }

    /// The out-of-process frame with this frame id, if it is still attached.
    pub(crate) fn remote(&self, frame: &str) -> Option<Doc> {
        self.registry()
            .frames
            .iter()
            .find(|f| f.frame == frame)
            .map(RemoteFrame::doc)
    }

    /// Every out-of-process frame still attached.
    pub(crate) fn remote_docs(&self) -> Vec<Doc> {
        self.registry()
            .frames
            .iter()
            .map(RemoteFrame::doc)
            .collect()
    }

    /// Out-of-process frames whose owner element lives in `holder`.
    pub(crate) fn remote_children(&self, holder: &Holder) -> Vec<Doc> {
        self.registry()
            .frames
            .iter()
            .filter(|f| &f.parent == holder)
            .map(RemoteFrame::doc)
            .collect()
    }

    /// Where `doc`'s owner element lives, and the document holding it.
    pub(crate) fn parent(&self, doc: &Doc) -> Option<(Holder, Doc)> {
        match doc {
            Doc::Top => None,
            Doc::Context { .. } => Some((None, Doc::Top)),
            Doc::Remote { session, .. } => {
                let registry = self.registry();
                let parent = registry
                    .frames
                    .iter()
                    .find(|f| &f.session == session)?
                    .parent
                    .clone();
                let Some(parent_session) = parent else {
                    return Some((None, Doc::Top));
                };
                let holder = registry
                    .frames
                    .iter()
                    .find(|f| f.session == parent_session)?;
                Some((Some(parent_session), holder.doc()))
            }
        }
    }

    /// Tags the owner element of `frame` (living in `holder`) with the frame's key, once;
    /// returns the owner's object id. `None` when the frame is going away.
    pub(crate) async fn tag_owner(
        &self,
        browser: &BrowserHandle,
        holder: &Holder,
        frame: &str,
    ) -> Option<String> {
        if let Some(owner) = self.registry().owners.get(frame) {
            return Some(owner.clone());
        }
        let target = self.target(holder);
        let find = GetFrameOwnerParams::new(FrameId::new(frame));
        let owner = browser
            .cdp("finding a frame's element", target.send(find))
            .await
            .ok()?;
        let resolve = ResolveNodeParams {
            backend_node_id: Some(owner.backend_node_id),
            ..Default::default()
        };
        let object = browser
            .cdp("finding a frame's element", target.send(resolve))
            .await
            .ok()?
            .object
            .object_id?;
        let mut tag = CallFunctionOnParams::new(TAG_OWNER_JS);
        tag.object_id = Some(object.clone());
        tag.arguments = Some(vec![CallArgument {
            value: Some(frame.into()),
            unserializable_value: None,
            object_id: None,
        }]);
        browser
            .cdp("marking a frame's element", target.send(tag))
            .await
            .ok()?;
        let object = object.inner().clone();
        self.registry()
            .owners
            .insert(frame.to_string(), object.clone());
        Some(object)
    }

    /// Forgets a tagged owner whose object id no longer works (its document was replaced).
    pub(crate) fn forget_owner(&self, frame: &str) {
        self.registry().owners.remove(frame);
    }

    /// Forgets the owners of frames of the page's own process that are gone (out-of-process
    /// ones are forgotten when they detach); `live` are the page's frames now.
    pub(crate) fn keep_owners_of(&self, live: &[String]) {
        let mut registry = self.registry();
        let remote: Vec<String> = registry.frames.iter().map(|f| f.frame.clone()).collect();
        registry
            .owners
            .retain(|frame, _| live.contains(frame) || remote.contains(frame));
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        lock_registry(&self.registry)
    }
}

impl Linked {
    async fn attach(
        browser: &BrowserHandle,
        link: &Arc<CdpLink>,
        page: &Page,
        watched: Watched,
    ) -> ToolResult<Self> {
        let attach = AttachToTargetParams {
            target_id: page.target_id().clone(),
            flatten: Some(true),
        };
        let page_session = browser
            .cdp("attaching to the tab", link.call(None, attach))
            .await?
            .session_id
            .inner()
            .clone();
        let (route, receiver) = mpsc::unbounded_channel();
        link.route(&page_session, route.clone());
        let watcher = tokio::spawn(watch(link.clone(), page_session.clone(), watched, receiver));
        let linked = Self {
            link: link.clone(),
            page_session,
            route,
            watcher,
        };
        browser
            .cdp(
                "following the tab's frames",
                link.call(Some(&linked.page_session), auto_attach()),
            )
            .await?;
        Ok(linked)
    }
}

/// Marks an `<iframe>` with its frame's key, invisibly to the page: a registered symbol is
/// shared by every same-origin realm, so the agent of whichever document walks the element
/// sees it.
const TAG_OWNER_JS: &str = "function (key) { Object.defineProperty(this, Symbol.for('webpilot.frame'), \
    { value: key, configurable: true }); }";

fn lock_registry(registry: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    registry.locked()
}

/// Target types auto-attached: frames (set up like the tab) and workers (whose requests and
/// console the tab's log records).
const ATTACHED: [&str; 4] = ["iframe", "worker", "shared_worker", "service_worker"];

/// Iframes and workers; anything else stays unattached (and unpaused).
fn auto_attach() -> SetAutoAttachParams {
    let entries: Vec<FilterEntry> = ATTACHED
        .iter()
        .map(|kind| FilterEntry {
            exclude: Some(false),
            r#type: Some((*kind).into()),
        })
        .collect();
    SetAutoAttachParams {
        auto_attach: true,
        wait_for_debugger_on_start: true,
        flatten: Some(true),
        filter: Some(TargetFilter::new(entries)),
    }
}

/// What the frame watcher shares with the tab.
struct Watched {
    registry: Arc<Mutex<Registry>>,
    events: Arc<Mutex<TabEvents>>,
    log: Arc<Mutex<TabLog>>,
    guard: Arc<DocumentGuard>,
    scripts: InitScripts,
}

/// Follows the tab's out-of-process frames until the tab is dropped.
async fn watch(
    link: Arc<CdpLink>,
    page_session: String,
    watched: Watched,
    mut receiver: mpsc::UnboundedReceiver<LinkEvent>,
) {
    let Watched {
        registry,
        events,
        log,
        guard,
        scripts,
    } = watched;
    let lane = guard.lane().cloned();
    while let Some(LinkEvent { session, event }) = receiver.recv().await {
        let target = || CdpTarget::Session(link.clone(), session.clone());
        let traffic = Traffic {
            target: target(),
            events: &events,
            log: &log,
            lane: lane.as_deref(),
            origin: origin_of(&registry, &session),
        };
        if traffic.record(&event) {
            continue;
        }
        match event {
            CdpEvent::TargetAttachedToTarget(attached)
                if attached.target_info.r#type != "iframe" =>
            {
                let child = attached.session_id.inner().clone();
                lock_registry(&registry)
                    .workers
                    .insert(child.clone(), attached.target_info.url.clone());
                tokio::spawn(super::frame_traffic::prepare_worker(link.clone(), child));
            }
            CdpEvent::TargetAttachedToTarget(attached) => {
                let child = attached.session_id.inner().clone();
                let frame = attached.target_info.target_id.inner().clone();
                lock(&events).frame_attached(&frame);
                lock_registry(&registry).frames.push(RemoteFrame {
                    session: child.clone(),
                    frame,
                    parent: (session != page_session).then(|| session.clone()),
                });
                let scripts = lock_init(&scripts).clone();
                tokio::spawn(prepare(link.clone(), child, scripts));
            }
            CdpEvent::TargetDetachedFromTarget(detached) => {
                forget(&registry, &events, detached.session_id.inner());
            }
            CdpEvent::FetchRequestPaused(paused) => {
                // Its main-frame refusals are the tab's own target's business: none here.
                let answer =
                    super::guard::answer(target(), guard.clone(), events.clone(), None, paused);
                tokio::spawn(answer);
            }
            CdpEvent::PageJavascriptDialogOpening(opening) => {
                let events = events.clone();
                let target = target();
                tokio::spawn(async move { answer_dialog(&target, &opening, &events).await });
            }
            _ => {}
        }
    }
}

fn lock_init(scripts: &InitScripts) -> std::sync::MutexGuard<'_, Vec<String>> {
    scripts.locked()
}

/// Sets a new frame up like a tab, then lets it run. Failures mean the frame went away.
async fn prepare(link: Arc<CdpLink>, session: String, scripts: Vec<String>) {
    let _ = futures::join!(
        super::frame_traffic::watch_traffic(&link, &session),
        link.call(
            Some(&session),
            chromiumoxide::cdp::browser_protocol::page::EnableParams::default()
        ),
        link.call(Some(&session), super::guard::document_pattern()),
        link.call(Some(&session), auto_attach()),
    );
    for script in std::iter::once(AGENT_JS.to_string()).chain(scripts) {
        let install = AddScriptToEvaluateOnNewDocumentParams::new(script);
        let _ = link.call(Some(&session), install).await;
    }
    let _ = link
        .call(Some(&session), RunIfWaitingForDebuggerParams::default())
        .await;
}

/// Who a session's events come from: a worker, or a frame (a frame's target is named after
/// the frame).
fn origin_of(registry: &Mutex<Registry>, session: &str) -> Origin {
    let registry = lock_registry(registry);
    match registry.workers.get(session) {
        Some(url) => Origin::Worker(url.clone()),
        None => Origin::Frame(
            registry
                .frames
                .iter()
                .find(|f| f.session == session)
                .map(|f| f.frame.clone())
                .unwrap_or_default(),
        ),
    }
}

/// Drops a detached frame, the frames inside it and their requests.
fn forget(registry: &Mutex<Registry>, events: &Mutex<TabEvents>, session: &str) {
    let mut registry = lock_registry(registry);
    let mut gone = vec![session.to_string()];
    let mut index = 0;
    while index < gone.len() {
        let parent = gone[index].clone();
        gone.extend(
            registry
                .frames
                .iter()
                .filter(|f| f.parent.as_ref() == Some(&parent))
                .map(|f| f.session.clone()),
        );
        index += 1;
    }
    let frames: Vec<String> = registry
        .frames
        .iter()
        .filter(|f| gone.contains(&f.session))
        .map(|f| f.frame.clone())
        .collect();
    registry.frames.retain(|f| !gone.contains(&f.session));
    registry.workers.retain(|worker, _| !gone.contains(worker));
    registry.owners.retain(|frame, _| !frames.contains(frame));
    drop(registry);
    let mut events = lock(events);
    events
        .inflight
        .retain(|key, _| !gone.iter().any(|s| key.starts_with(&format!("{s}/"))));
    for frame in &frames {
        events.frames.stopped_loading(frame);
    }
}
