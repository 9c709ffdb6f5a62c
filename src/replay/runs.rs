//! Replays run in the background for the HTTP front (`POST /api/replays`): each run's steps as
//! they finish, its report once done, and a stream of both for anyone watching — kept in
//! memory per tenant for an hour after they end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;

use super::{Options, Outcome, Report};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::{TenantName, unguessable};
use crate::sync::Locked;
use crate::tenancy::Tenant;
use crate::tools::Registry;
use crate::trace::Step;

/// How long a finished run stays readable.
const KEPT: Duration = Duration::from_secs(3600);
/// Runs a tenant may have going at once.
const RUNNING_PER_TENANT: usize = 4;

/// Every tenant's replay runs.
#[derive(Default)]
pub struct Replays {
    runs: Mutex<HashMap<String, Arc<Run>>>,
}

/// One replay run.
struct Run {
    tenant: TenantName,
    steps: usize,
    state: Mutex<RunState>,
    events: broadcast::Sender<RunEvent>,
}

#[derive(Default)]
struct RunState {
    done: Vec<Outcome>,
    report: Option<Report>,
    ended: Option<Instant>,
}

/// What a watcher hears.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// A step (or an end check) finished.
    Step(Outcome),
    /// A step waits for a person (`handoff: ask`): the live view's link, then how long so far.
    Handoff(crate::tools::HandoffProgress),
    /// The run ended.
    Done(Report),
}

/// A run as it is now.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunView {
    pub id: String,
    /// `running`, `passed` or `failed`.
    pub status: &'static str,
    /// Steps in the trace.
    pub steps_total: usize,
    /// The steps (and end checks) finished so far, in order.
    #[schema(value_type = Vec<Object>)]
    pub steps: Vec<Outcome>,
    /// Steps that found their element only by role and name or as the nearest.
    pub healed: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
}

impl Replays {
    /// Starts replaying `steps` for `tenant` in the background; the run as it starts.
    pub fn start(
        &self,
        registry: Arc<Registry>,
        tenant: Arc<Tenant>,
        steps: Vec<Step>,
        mut options: Options,
    ) -> ToolResult<RunView> {
        let id = unguessable("rp-");
        let (events, _) = broadcast::channel(256);
        let run = Arc::new(Run {
            tenant: tenant.name().clone(),
            steps: steps.len(),
            state: Mutex::default(),
            events,
        });
        {
            let mut runs = self.runs.locked();
            runs.retain(|_, run| {
                run.state
                    .locked()
                    .ended
                    .is_none_or(|at| at.elapsed() < KEPT)
            });
            let running = runs
                .values()
                .filter(|r| &r.tenant == tenant.name() && r.state.locked().ended.is_none())
                .count();
            if running >= RUNNING_PER_TENANT {
                return Err(ToolError::new(
                    ErrorCode::Limit,
                    format!("{running} replays of this tenant are running"),
                )
                .with_hint("wait for one to end (GET /api/replays/{id}/events) and start again"));
            }
            runs.insert(id.clone(), run.clone());
        }
        let view = run.view(&id);
        let (progress, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let (handoffs, mut asked) = tokio::sync::mpsc::unbounded_channel();
        options.handoff_progress = Some(handoffs);
        let relay = run.clone();
        tokio::spawn(async move {
            let replay = async {
                let report =
                    super::run_watched(&registry, tenant, &steps, &options, Some(progress)).await;
                // The last sender of hand-off news goes with the options.
                drop(options);
                report
            };
            let relayed = async {
                while let Some(outcome) = heard.recv().await {
                    relay.step(outcome);
                }
            };
            let handed = async {
                while let Some(handoff) = asked.recv().await {
                    let _ = relay.events.send(RunEvent::Handoff(handoff));
                }
            };
            let (report, (), ()) = tokio::join!(replay, relayed, handed);
            relay.finish(report);
        });
        Ok(view)
    }

    /// The run `id` of `tenant`.
    pub fn view(&self, tenant: &Tenant, id: &str) -> ToolResult<RunView> {
        Ok(self.run(tenant, id)?.view(id))
    }

    /// The run as it is, and what it does from now on (nothing lost or told twice between).
    pub fn subscribe(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> ToolResult<(RunView, broadcast::Receiver<RunEvent>)> {
        let run = self.run(tenant, id)?;
        // Steps are told under the state's lock: the view and the subscription taken under it
        // neither miss one nor hold one twice.
        let state = run.state.locked();
        let receiver = run.events.subscribe();
        Ok((run.view_of(id, &state), receiver))
    }

    fn run(&self, tenant: &Tenant, id: &str) -> ToolResult<Arc<Run>> {
        self.runs
            .locked()
            .get(id)
            .filter(|run| &run.tenant == tenant.name())
            .cloned()
            .ok_or_else(|| {
                ToolError::new(ErrorCode::NoSuchTask, format!("no replay {id}"))
                    .with_hint("start one with POST /api/replays; finished ones are kept an hour")
            })
    }
}

impl Run {
    fn view(&self, id: &str) -> RunView {
        self.view_of(id, &self.state.locked())
    }

    fn view_of(&self, id: &str, state: &RunState) -> RunView {
        let status = match &state.report {
            None => "running",
            Some(report) if report.passed => "passed",
            Some(_) => "failed",
        };
        RunView {
            id: id.to_string(),
            status,
            steps_total: self.steps,
            steps: state.done.clone(),
            healed: state
                .done
                .iter()
                .filter(|o| o.status == super::Status::Healed)
                .count(),
            elapsed_ms: state.report.as_ref().map(|r| r.elapsed_ms),
        }
    }

    fn step(&self, outcome: Outcome) {
        let mut state = self.state.locked();
        state.done.push(outcome.clone());
        let _ = self.events.send(RunEvent::Step(outcome));
    }

    fn finish(&self, report: Report) {
        let mut state = self.state.locked();
        state.ended = Some(Instant::now());
        state.report = Some(report.clone());
        let _ = self.events.send(RunEvent::Done(report));
    }
}
