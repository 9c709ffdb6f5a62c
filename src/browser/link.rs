//! A second CDP connection to the same browser, for what chromiumoxide cannot do: commands to
//! the sessions of out-of-process frames (chromiumoxide sends only to a page's own session and
//! delivers child sessions' events without saying whose they are), and `Page.navigate` sent
//! straight to the page (chromiumoxide queues a page's navigations until the previous one has
//! loaded).
//!
//! One link per browser generation. Events are routed by session: a tab registers its page
//! session, and every session auto-attached under a routed one (its frames) is routed to the
//! same receiver before any of its events can arrive.

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chromiumoxide::cdp::browser_protocol::{fetch, log, network, page, target};
use chromiumoxide::cdp::events::CdpEvent;
use chromiumoxide::cdp::js_protocol::runtime;
use chromiumoxide::conn::Connection;
use chromiumoxide::types::{CallId, Command, EventMessage, Message, Method, MethodId};
use futures::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// An event of a routed session.
#[derive(Debug)]
pub(crate) struct LinkEvent {
    pub session: String,
    pub event: CdpEvent,
}

type Reply = oneshot::Sender<Result<serde_json::Value, String>>;

struct Outgoing {
    method: chromiumoxide::types::MethodId,
    session: Option<String>,
    params: serde_json::Value,
    reply: Reply,
}

/// Receivers of events, by session id.
type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<LinkEvent>>>>;

pub(crate) struct CdpLink {
    outgoing: mpsc::UnboundedSender<Outgoing>,
    routes: Routes,
    task: JoinHandle<()>,
}

impl Drop for CdpLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CdpLink {
    /// Opens the connection (the browser's DevTools WebSocket accepts several clients).
    pub(crate) async fn connect(ws_url: &str) -> Result<Self, String> {
        let connection = Connection::<RawEvent>::connect(ws_url)
            .await
            .map_err(|e| e.to_string())?;
        let (outgoing, commands) = mpsc::unbounded_channel();
        let routes: Routes = Arc::default();
        let task = tokio::spawn(pump(connection, commands, routes.clone()));
        Ok(Self {
            outgoing,
            routes,
            task,
        })
    }

    /// Sends `command` to `session` (or to the browser) and waits for its answer. Time limits
    /// are the caller's (`BrowserHandle::within`).
    pub(crate) async fn call<C: Command>(
        &self,
        session: Option<&str>,
        command: C,
    ) -> Result<C::Response, String> {
        let method = command.identifier();
        let params = serde_json::to_value(&command).map_err(|e| e.to_string())?;
        let (reply, answer) = oneshot::channel();
        self.outgoing
            .send(Outgoing {
                method,
                session: session.map(str::to_string),
                params,
                reply,
            })
            .map_err(|_| "the browser connection is closed".to_string())?;
        let value = answer
            .await
            .map_err(|_| "the browser connection is closed".to_string())??;
        C::response_from_value(value).map_err(|e| e.to_string())
    }

    /// Routes the events of `session`, and of every session attached under it, to `to`.
    pub(crate) fn route(&self, session: &str, to: mpsc::UnboundedSender<LinkEvent>) {
        lock(&self.routes).insert(session.to_string(), to);
    }

    /// Stops routing to `to` (a tab that closed).
    pub(crate) fn unroute(&self, to: &mpsc::UnboundedSender<LinkEvent>) {
        lock(&self.routes).retain(|_, route| !route.same_channel(to));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.locked()
}

/// Drives the connection: sends queued commands, answers callers, routes events. Ends when the
/// connection closes; callers then get "closed" errors.
async fn pump(
    mut connection: Connection<RawEvent>,
    mut commands: mpsc::UnboundedReceiver<Outgoing>,
    routes: Routes,
) {
    let mut waiting: HashMap<CallId, Reply> = HashMap::new();
    loop {
        tokio::select! {
            command = commands.recv() => {
                let Some(command) = command else { return };
                let session = command.session.map(Into::into);
                match connection.submit_command(command.method, session, command.params) {
                    Ok(id) => { waiting.insert(id, command.reply); }
                    Err(error) => { let _ = command.reply.send(Err(error.to_string())); }
                }
            }
            message = connection.next() => match message {
                None => return,
                Some(Ok(Message::Response(response))) => {
                    if let Some(reply) = waiting.remove(&response.id) {
                        let answer = match (response.result, response.error) {
                            (_, Some(error)) => Err(error.message),
                            (result, None) => Ok(result.unwrap_or_default()),
                        };
                        let _ = reply.send(answer);
                    }
                }
                Some(Ok(Message::Event(event))) => deliver(&routes, event),
                // A message this protocol version cannot parse; nothing waits for it.
                Some(Err(error)) => tracing::debug!(%error, "CDP link: unreadable message"),
            },
        }
    }
}

/// An event as it comes, its parameters unparsed. Only the kinds the link's receivers handle
/// are parsed ([`typed`]): parsing into chromiumoxide's `CdpEventMessage` built a copy of its
/// parser for every CDP event into this crate, 8 % of the library's machine code.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    method: MethodId,
    session_id: Option<String>,
    #[serde(default)]
    params: serde_json::Value,
}

impl Method for RawEvent {
    fn identifier(&self) -> MethodId {
        self.method.clone()
    }
}

impl EventMessage for RawEvent {
    fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}

/// The event, if it is of a kind the link's receivers (frames and their traffic) handle.
fn typed(method: &str, params: serde_json::Value) -> Option<CdpEvent> {
    fn parse<T: DeserializeOwned>(params: serde_json::Value) -> Option<T> {
        serde_json::from_value(params).ok()
    }
    Some(match method {
        target::EventAttachedToTarget::IDENTIFIER => {
            CdpEvent::TargetAttachedToTarget(parse(params)?)
        }
        target::EventDetachedFromTarget::IDENTIFIER => {
            CdpEvent::TargetDetachedFromTarget(parse(params)?)
        }
        fetch::EventRequestPaused::IDENTIFIER => CdpEvent::FetchRequestPaused(parse(params)?),
        page::EventJavascriptDialogOpening::IDENTIFIER => {
            CdpEvent::PageJavascriptDialogOpening(parse(params)?)
        }
        page::EventFrameStartedLoading::IDENTIFIER => {
            CdpEvent::PageFrameStartedLoading(parse(params)?)
        }
        page::EventFrameStoppedLoading::IDENTIFIER => {
            CdpEvent::PageFrameStoppedLoading(parse(params)?)
        }
        page::EventFrameDetached::IDENTIFIER => CdpEvent::PageFrameDetached(parse(params)?),
        page::EventFrameNavigated::IDENTIFIER => CdpEvent::PageFrameNavigated(parse(params)?),
        network::EventRequestWillBeSent::IDENTIFIER => {
            CdpEvent::NetworkRequestWillBeSent(parse(params)?)
        }
        network::EventResponseReceived::IDENTIFIER => {
            CdpEvent::NetworkResponseReceived(parse(params)?)
        }
        network::EventLoadingFinished::IDENTIFIER => {
            CdpEvent::NetworkLoadingFinished(parse(params)?)
        }
        network::EventLoadingFailed::IDENTIFIER => CdpEvent::NetworkLoadingFailed(parse(params)?),
        network::EventDataReceived::IDENTIFIER => CdpEvent::NetworkDataReceived(parse(params)?),
        network::EventEventSourceMessageReceived::IDENTIFIER => {
            CdpEvent::NetworkEventSourceMessageReceived(parse(params)?)
        }
        runtime::EventConsoleApiCalled::IDENTIFIER => {
            CdpEvent::RuntimeConsoleApiCalled(parse(params)?)
        }
        runtime::EventExceptionThrown::IDENTIFIER => {
            CdpEvent::RuntimeExceptionThrown(parse(params)?)
        }
        log::EventEntryAdded::IDENTIFIER => CdpEvent::LogEntryAdded(parse(params)?),
        _ => return None,
    })
}

fn deliver(routes: &Routes, message: RawEvent) {
    let Some(session) = message.session_id else {
        return;
    };
    let Some(event) = typed(&message.method, message.params) else {
        return;
    };
    let mut routes = lock(routes);
    let Some(route) = routes.get(&session).cloned() else {
        return;
    };
    match &event {
        CdpEvent::TargetAttachedToTarget(attached) => {
            routes.insert(attached.session_id.inner().clone(), route.clone());
        }
        CdpEvent::TargetDetachedFromTarget(detached) => {
            routes.remove(detached.session_id.inner());
        }
        _ => {}
    }
    drop(routes);
    let _ = route.send(LinkEvent { session, event });
}

/// Where a command goes: a page's own session through chromiumoxide, or a session of the link.
#[derive(Clone)]
pub(crate) enum CdpTarget {
    Page(chromiumoxide::Page),
    Session(Arc<CdpLink>, String),
}

impl CdpTarget {
    pub(crate) async fn send<C: Command>(&self, command: C) -> Result<C::Response, String> {
        match self {
            Self::Page(page) => page
                .execute(command)
                .await
                .map(|response| response.result)
                .map_err(|e| e.to_string()),
            Self::Session(link, session) => link.call(Some(session), command).await,
        }
    }
}
