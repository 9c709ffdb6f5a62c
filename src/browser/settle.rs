//! When is a page *ready*? Load fired, no request in flight, no short timer, fetch or animation
//! frame pending, and the DOM quiet for a moment — or the caller's `wait_for` satisfied.
//!
//! The page agent (agent.js) counts timers, fetch/XHR and animation frames and stamps the last
//! DOM mutation; CDP network events count every other request. This module polls both.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::frame_loads::FrameMark;
use super::frames::Doc;
use super::tab::{Tab, lock};
use crate::error::{ErrorCode, ToolResult};

/// How long the DOM must stay unchanged once nothing else is pending. Short because timers,
/// messages and requests are tracked directly; it only covers work we cannot see (workers,
/// IndexedDB callbacks).
pub const DOM_QUIET_MS: u64 = 30;
/// Interval between readiness probes (each is one short `Runtime.evaluate`).
pub const SETTLE_POLL_MS: u64 = 10;
/// After load, a page still busy this long (animation loops, polling) is declared ready anyway.
pub const SETTLE_CAP_MS: u64 = 3_000;
/// After load, a request pending this long is treated as long-lived (long-poll, stream) and no
/// longer blocks readiness.
pub const LONG_REQUEST_MS: u64 = 2_000;
/// After `beforeunload`, how long the old document counts as "navigating away" before CDP's
/// loading events must take over (a download or a 204 ends the navigation without a commit).
const NAVIGATION_START_GRACE_MS: u64 = 500;
/// What `missing` says while only the watch after an action is left.
const OBSERVING: &str = "watching for effects of the action";
/// How `missing` opens a DOM-quiet item.
const ACTIVE_AGO: &str = "the page was active";
/// Upper bound for a single probe; a page stuck in a script must not stall the poll.
const PROBE_TIMEOUT_MS: u64 = 1_000;
/// How much longer than asked a pause in the page may take before it is given up on.
const PAUSE_SLACK_MS: u64 = 20;

/// How readiness was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadyBy {
    /// Load fired and network, timers and DOM went quiet.
    Quiet,
    /// The caller's `wait_for` text or selector appeared.
    WaitFor,
    /// Loaded, but still busy after `SETTLE_CAP_MS`; declared ready anyway.
    SettleCap,
    /// The time limit passed first; `missing` says what was not there.
    Timeout,
}

/// The readiness verdict reported to agents.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Readiness {
    pub by: ReadyBy,
    pub after_ms: u64,
    /// What was still missing or busy when the verdict was made (empty when fully quiet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// A readiness verdict as an action reports it: a few words when all went quiet, else whole.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its schema is used: `Readiness::serialize_short` writes it.
enum ReadyReport {
    Short(String),
    Whole(Readiness),
}

impl Readiness {
    /// `"quiet 12 ms"` when nothing was missing and the time did not run out; the verdict whole
    /// otherwise.
    fn serialize_short<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.missing.is_empty() || self.by == ReadyBy::Timeout {
            return self.serialize(serializer);
        }
        let by = match self.by {
            ReadyBy::Quiet => "quiet",
            ReadyBy::WaitFor => "wait_for",
            ReadyBy::SettleCap => "settle_cap",
            ReadyBy::Timeout => "timeout",
        };
        serializer.serialize_str(&format!("{by} {} ms", self.after_ms))
    }
}

/// What to wait for.
pub struct SettleGoal<'a> {
    pub wait_for: Option<&'a str>,
    pub started: Instant,
    pub timeout: Duration,
    /// Main-frame commits seen before a navigation; readiness needs a newer one.
    pub commits_before: Option<u64>,
    /// How long the DOM must stay unchanged (`DOM_QUIET_MS` for loads, less after actions).
    pub dom_quiet: Duration,
    /// Not ready before this much time has passed: after an action, gives a navigation or
    /// request it triggered the moment it needs to show up.
    pub observe_at_least: Duration,
    /// After an action: what was already pending before it, which the wait ignores as long as
    /// the document stays the same.
    pub baseline: Option<&'a ActionMark>,
}

/// The page's state just before an action, so that only what the action starts is waited for.
#[derive(Debug, Clone)]
pub struct ActionMark {
    commits: u64,
    /// Requests in flight before the action.
    inflight: HashSet<String>,
    /// The document's clock (`performance.now()`) before the action, when the agent answered.
    clock: Option<f64>,
    /// The foreign frame the action happens in, with its own clock: its work (a form it
    /// submits, timers it sets) is watched too.
    frame: Option<(Doc, Option<f64>)>,
    /// Loads and commits of the frames below the top one so far.
    frames: FrameMark,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    ready_state: String,
    #[serde(default)]
    timers: u32,
    #[serde(default)]
    frames: u32,
    #[serde(default)]
    requests: u32,
    #[serde(default)]
    messages: u32,
    #[serde(default)]
    quiet_ms: u64,
    /// Milliseconds since the page started navigating away (`beforeunload`), if it did.
    #[serde(default)]
    leaving_ms: Option<u64>,
    /// Milliseconds since a link or form of the action sent a document into a named frame.
    #[serde(default)]
    framed_ms: Option<u64>,
    /// The document has no scripts of its own (absent where the agent is missing).
    #[serde(default)]
    unscripted: bool,
    found: Option<bool>,
}

impl Tab {
    /// Notes what the page is busy with before an action on `ref_id` (or on the page).
    pub async fn begin_action(&self, ref_id: Option<u32>) -> ActionMark {
        let clock = self.clock(&Doc::Top).await;
        let frame = match ref_id {
            Some(ref_id) => match self.locate_ref(ref_id).await {
                Ok(doc) if doc != Doc::Top => {
                    let clock = self.clock(&doc).await;
                    Some((doc, clock))
                }
                _ => None,
            },
            None => None,
        };
        let events = lock(&self.events);
        ActionMark {
            commits: events.main_commits,
            inflight: events.inflight.keys().cloned().collect(),
            clock,
            frame,
            frames: events.frames.mark(),
        }
    }

    /// The agent's `performance.now()` in `doc`, if it answers.
    async fn clock(&self, doc: &Doc) -> Option<f64> {
        let limit = Duration::from_millis(PROBE_TIMEOUT_MS);
        self.evaluate_in(doc, "window.__wp ? __wp.now() : null", Some(limit))
            .await
            .ok()
            .and_then(|value| value.as_f64())
    }

    /// What keeps the frame an action happened in busy with the action's own work; nothing
    /// when the frame is gone (a frame that navigated elsewhere is the page's business then).
    async fn frame_busy(&self, mark: &ActionMark, quiet: Duration) -> Vec<String> {
        let Some((doc, clock)) = &mark.frame else {
            return Vec::new();
        };
        let limit = Duration::from_millis(PROBE_TIMEOUT_MS);
        let call = probe_expression(None, *clock);
        let Ok(value) = self.evaluate_in(doc, &call, Some(limit)).await else {
            return Vec::new();
        };
        let Ok(probe) = serde_json::from_value::<Probe>(value) else {
            return Vec::new();
        };
        let mut busy = Vec::new();
        if probe
            .leaving_ms
            .is_some_and(|ms| ms < NAVIGATION_START_GRACE_MS)
        {
            busy.push("a navigation is in progress".to_string());
        }
        if probe.ready_state != "complete" {
            busy.push(format!("load event (document is {})", probe.ready_state));
        }
        busy.extend(pending_work(&probe, quiet.as_millis() as u64));
        busy.into_iter()
            .map(|item| format!("in the frame acted in: {item}"))
            .collect()
    }

    /// Polls until the page is ready per `goal`, or the time is up (then reports what was missing).
    /// `abort` is checked each round: a navigation that failed ends the wait with its error.
    pub(crate) async fn settle(
        &self,
        goal: &SettleGoal<'_>,
        mut abort: impl FnMut() -> ToolResult<()>,
    ) -> ToolResult<Readiness> {
        let _stage = crate::timing::stage("settle");
        let deadline = goal.started + goal.timeout;
        let probe_call = probe_expression(goal.wait_for, None);
        let since = goal.baseline.and_then(|mark| mark.clock);
        let probe_since = probe_expression(goal.wait_for, since);
        let mut loaded_at: Option<Instant> = None;
        loop {
            abort()?;
            self.liveness.check()?;
            let committed = goal
                .commits_before
                .is_none_or(|before| self.main_commits() > before);
            // Same document as before the action: only what the action started counts.
            let unchanged = goal
                .baseline
                .filter(|mark| mark.commits == self.main_commits());
            let probe = if !committed {
                None
            } else if unchanged.is_some() {
                self.probe(&probe_since).await?
            } else {
                self.probe(&probe_call).await?
            };
            let now = Instant::now();
            let elapsed = now.duration_since(goal.started).as_millis() as u64;
            let verdict = |by, missing| Readiness {
                by,
                after_ms: elapsed,
                missing,
            };
            if let Some(probe) = &probe {
                if probe.found == Some(true) {
                    return Ok(verdict(ReadyBy::WaitFor, Vec::new()));
                }
                if probe.ready_state == "complete" {
                    loaded_at.get_or_insert(now);
                }
            }
            let quiet_ms = goal.dom_quiet.as_millis() as u64;
            let mut missing = self.missing(
                committed,
                probe.as_ref(),
                goal.wait_for,
                unchanged,
                loaded_at,
                now,
                quiet_ms,
            );
            if missing.is_empty()
                && let Some(mark) = goal.baseline
            {
                missing = self.frame_busy(mark, goal.dom_quiet).await;
            }
            let observed = now.duration_since(goal.started);
            if missing.is_empty() && observed < goal.observe_at_least {
                missing.push(OBSERVING.into());
            }
            if missing.is_empty() {
                return Ok(verdict(ReadyBy::Quiet, missing));
            }
            let capped = goal.wait_for.is_none()
                && loaded_at
                    .is_some_and(|t| now.duration_since(t).as_millis() as u64 >= SETTLE_CAP_MS);
            if capped {
                return Ok(verdict(ReadyBy::SettleCap, missing));
            }
            if now >= deadline {
                return Ok(verdict(ReadyBy::Timeout, missing));
            }
            let pause = next_pause(goal, probe.as_ref(), &missing, observed);
            self.pause_until_change(pause.min(deadline - now), probe.is_some())
                .await;
        }
    }

    /// Waits up to `pause`, woken early by the page's next DOM change or finished piece of
    /// work (the page agent's `changed`): the render that satisfies a wait is seen as it
    /// happens, not a poll later. A plain sleep where the agent cannot answer (`in_page`
    /// false: the last probe found none).
    async fn pause_until_change(&self, pause: Duration, in_page: bool) {
        if !in_page {
            return tokio::time::sleep(pause).await;
        }
        let started = Instant::now();
        let call = format!("window.__wp ? __wp.changed({}) : null", pause.as_millis());
        // Bounded on this side too: a page whose timers lag must not stretch the pause.
        let limit = pause + Duration::from_millis(PAUSE_SLACK_MS);
        if !matches!(
            self.evaluate_in(&Doc::Top, &call, Some(limit)).await,
            Ok(serde_json::Value::Bool(_))
        ) {
            tokio::time::sleep(pause.saturating_sub(started.elapsed())).await;
        }
    }

    /// One readiness probe of the top document; none when it could not answer (a document being
    /// replaced, a busy page: not ready yet). A dead browser ends the wait.
    async fn probe(&self, call: &str) -> ToolResult<Option<Probe>> {
        let limit = Duration::from_millis(PROBE_TIMEOUT_MS);
        match self.evaluate_in(&Doc::Top, call, Some(limit)).await {
            Ok(value) => Ok(serde_json::from_value::<Probe>(value).ok()),
            Err(error) if error.code == ErrorCode::BrowserUnavailable => Err(error),
            Err(_) => Ok(None),
        }
    }

    /// Everything that keeps the page from being ready, in words an agent can act on. With a
    /// `baseline` (an action on this same document), what was pending before it is left out:
    /// the document's own loading, requests already in flight (the probe counts the agent's
    /// timers and calls since then only).
    #[allow(clippy::too_many_arguments)]
    fn missing(
        &self,
        committed: bool,
        probe: Option<&Probe>,
        wait_for: Option<&str>,
        baseline: Option<&ActionMark>,
        loaded_at: Option<Instant>,
        now: Instant,
        quiet_ms: u64,
    ) -> Vec<String> {
        let mut missing = Vec::new();
        if !committed {
            missing.push("the server has not answered yet (navigation not committed)".into());
            return missing;
        }
        let Some(probe) = probe else {
            missing.push("the page is not responding to scripts yet".into());
            return missing;
        };
        if let Some(text) = wait_for {
            missing.push(format!("wait_for {text:?} has not appeared"));
        }
        let just_left = probe
            .leaving_ms
            .is_some_and(|ms| ms < NAVIGATION_START_GRACE_MS);
        if just_left || (lock(&self.events).main_loading && probe.ready_state == "complete") {
            missing.push("a navigation is in progress".into());
        }
        if probe.ready_state != "complete" && baseline.is_none() {
            missing.push(format!("load event (document is {})", probe.ready_state));
        }
        let pending = self.pending_requests(baseline, loaded_at, now);
        if !pending.is_empty() {
            let shown: Vec<&str> = pending.iter().take(3).map(String::as_str).collect();
            missing.push(format!(
                "{} request(s) pending: {}",
                pending.len(),
                shown.join(", ")
            ));
        }
        if let Some(mark) = baseline {
            let long = Duration::from_millis(LONG_REQUEST_MS);
            let events = lock(&self.events);
            let loading = events.frames.loading_since(mark.frames, now, long);
            // A frame out of the agent's sight reports its load over its own connection.
            let framed = probe
                .framed_ms
                .is_some_and(|ms| ms < NAVIGATION_START_GRACE_MS);
            if loading > 0 {
                missing.push(format!("{loading} frame(s) loading a new document"));
            } else if framed && !events.frames.begun_since(mark.frames) {
                missing.push("a frame the action named is about to load".into());
            }
        }
        // A loaded document without scripts has nothing left to change it.
        let quiet_ms = if probe.unscripted && probe.ready_state == "complete" {
            0
        } else {
            quiet_ms
        };
        missing.extend(pending_work(probe, quiet_ms));
        missing
    }

    /// URLs of requests in flight, leaving out long-lived ones once the page has loaded and
    /// those already pending before an action.
    fn pending_requests(
        &self,
        baseline: Option<&ActionMark>,
        loaded_at: Option<Instant>,
        now: Instant,
    ) -> Vec<String> {
        let events = lock(&self.events);
        let mut pending: Vec<(Instant, String)> = events
            .inflight
            .iter()
            .filter(|(key, _)| baseline.is_none_or(|mark| !mark.inflight.contains(*key)))
            .map(|(_, pending)| pending)
            .filter(|pending| {
                loaded_at.is_none()
                    || (now.duration_since(pending.started).as_millis() as u64) < LONG_REQUEST_MS
            })
            .map(|pending| (pending.started, shorten(&pending.url)))
            .collect();
        pending.sort();
        pending.into_iter().map(|(_, url)| url).collect()
    }
}

/// The agent's counters in words: calls, timers, messages and frames pending, recent activity.
fn pending_work(probe: &Probe, quiet_ms: u64) -> Vec<String> {
    let mut pending = Vec::new();
    if probe.requests > 0 {
        pending.push(format!("{} fetch/XHR call(s) unsettled", probe.requests));
    }
    if probe.timers > 0 {
        pending.push(format!("{} short timer(s) pending", probe.timers));
    }
    if probe.messages > 0 {
        pending.push(format!(
            "{} scheduled message(s) pending (MessageChannel, postMessage)",
            probe.messages
        ));
    }
    if probe.frames > 0 {
        pending.push(format!("{} animation frame(s) pending", probe.frames));
    }
    if probe.quiet_ms < quiet_ms {
        pending.push(format!(
            "{ACTIVE_AGO} {} ms ago (DOM change or finished work)",
            probe.quiet_ms
        ));
    }
    pending
}

fn shorten(url: &str) -> String {
    if url.chars().count() <= 100 {
        url.to_string()
    } else {
        format!("{}…", url.chars().take(99).collect::<String>())
    }
}

/// The probe: the agent's counters (of work started since `since`, a `performance.now()` of
/// the document, if given), or the bare document state where the agent is missing.
pub(crate) fn probe_expression(wait_for: Option<&str>, since: Option<f64>) -> String {
    let target = serde_json::to_string(&wait_for).unwrap_or_else(|_| "null".into());
    let since = since.map_or_else(|| "null".to_string(), |clock| clock.to_string());
    format!(
        "window.__wp ? __wp.state({target}, {since}) : {{ readyState: document.readyState, quietMs: 1e9, \
         found: {target} === null ? null : !!(document.body && document.body.innerText.includes({target})) }}"
    )
}

/// How long the page is watched after an action before it may be declared settled: long enough
/// for a request the action started outside the agent's sight (an image, a script) to show up
/// in CDP events. Navigations and fetches show in the agent at once.
pub const ACTION_OBSERVE_MS: u64 = 10;
/// DOM quiet window after an action. Shorter than after a load: the action's own work is
/// synchronous or goes through tracked timers, messages and requests.
pub const ACTION_DOM_QUIET_MS: u64 = 10;
/// DOM quiet window after setting a field's value: its handlers have run by the time the value
/// is set, and what they scheduled (timers, messages, requests) is tracked directly.
pub const INPUT_DOM_QUIET_MS: u64 = 4;
/// Upper bound of the wait after an action that did not navigate.
pub const ACTION_SETTLE_MAX_MS: u64 = 3_000;

/// How closely an action's effects are watched before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// A click, a key, a scroll: may start a navigation or a request the agent cannot see
    /// (an image, a script), which needs a moment to show in CDP's events.
    Action,
    /// A field's value set (typed, selected): only what its handlers started, which the agent
    /// sees at once, and the DOM settling from them.
    Input,
}

/// What an action caused, once the page settled.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Aftermath {
    /// The action started a navigation of the tab (left out when it did not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub navigated: bool,
    /// How the page settled: `"quiet 12 ms"`, or the verdict whole when something was missing
    /// or the time ran out.
    #[serde(serialize_with = "Readiness::serialize_short")]
    #[schemars(with = "ReadyReport")]
    pub ready: Readiness,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dialogs: Vec<super::tab::DialogRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub downloads: Vec<super::pool::Download>,
    /// Why the URL policy refused the document the action tried to open in this tab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_document: Option<String>,
    /// A frame inside the page loaded a new document: its URL (the latest, when several did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_navigated: Option<String>,
}

impl Tab {
    /// Waits only while the action's own work keeps the page busy (capped), then reports what
    /// changed. `mark` comes from `begin_action` just before the action.
    pub async fn settle_after_action(
        &self,
        mark: &ActionMark,
        watch: Watch,
        timeout: Duration,
    ) -> ToolResult<Aftermath> {
        let _stage = crate::timing::stage("settle after action");
        let started = Instant::now();
        let (dom_quiet, observe) = match watch {
            Watch::Action => (ACTION_DOM_QUIET_MS, ACTION_OBSERVE_MS),
            Watch::Input => (INPUT_DOM_QUIET_MS, 0),
        };
        let quick = SettleGoal {
            wait_for: None,
            started,
            timeout: timeout.min(Duration::from_millis(ACTION_SETTLE_MAX_MS)),
            commits_before: None,
            dom_quiet: Duration::from_millis(dom_quiet),
            observe_at_least: Duration::from_millis(observe),
            baseline: Some(mark),
        };
        let mut ready = self.settle(&quick, || Ok(())).await?;
        let navigated = self.main_commits() > mark.commits;
        if navigated && ready.by == ReadyBy::Timeout {
            // A navigation gets the caller's whole time limit, as browser_navigate would.
            let full = SettleGoal { timeout, ..quick };
            ready = self.settle(&full, || Ok(())).await?;
        }
        let frame_navigated = lock(&self.events)
            .frames
            .navigated_since(mark.frames)
            .filter(|_| !navigated)
            .map(shorten);
        Ok(Aftermath {
            navigated,
            ready,
            dialogs: self.take_dialogs(),
            downloads: self.take_downloads(),
            blocked_document: lock(&self.events)
                .blocked
                .take()
                .map(|refusal| refusal.message),
            frame_navigated,
        })
    }
}

impl Tab {
    /// Polls until `target` (text or CSS selector) is present — or absent with `gone` — and
    /// returns whether that happened within `timeout`.
    pub async fn wait_for_text(
        &self,
        target: &str,
        gone: bool,
        timeout: Duration,
    ) -> ToolResult<bool> {
        let _stage = crate::timing::stage("wait for text");
        let deadline = Instant::now() + timeout;
        let probe = probe_expression(Some(target), None);
        loop {
            self.liveness.check()?;
            let limit = Duration::from_millis(PROBE_TIMEOUT_MS);
            let found = match self.evaluate_in(&Doc::Top, &probe, Some(limit)).await {
                Ok(value) => value.get("found").and_then(serde_json::Value::as_bool),
                Err(error) if error.code == ErrorCode::BrowserUnavailable => return Err(error),
                Err(_) => None,
            };
            if found == Some(!gone) {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let pause = Duration::from_millis(SETTLE_POLL_MS).min(deadline - now);
            self.pause_until_change(pause, true).await;
        }
    }
}

/// How long to wait before the next probe: when only time is missing (the quiet window, the
/// watch after an action), until it has passed rather than the next poll; at most a poll.
fn next_pause(
    goal: &SettleGoal<'_>,
    probe: Option<&Probe>,
    missing: &[String],
    observed: Duration,
) -> Duration {
    let poll = Duration::from_millis(SETTLE_POLL_MS);
    let only_time = missing
        .iter()
        .all(|m| m == OBSERVING || m.starts_with(ACTIVE_AGO));
    match probe {
        Some(probe) if only_time => {
            let quiet_in = goal
                .dom_quiet
                .saturating_sub(Duration::from_millis(probe.quiet_ms));
            let observed_in = goal.observe_at_least.saturating_sub(observed);
            quiet_in
                .max(observed_in)
                .max(Duration::from_millis(1))
                .min(poll)
        }
        _ => poll,
    }
}
