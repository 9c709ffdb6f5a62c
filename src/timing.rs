//! Where one tool call's time went: the layers a call passes through note their stages (each
//! CDP round trip by what it was for, readiness waits, element listings, image encoding), and
//! REST answers them as a standard `Server-Timing` header. Nothing reaches the agent: the
//! header is for benches (`bench/ab.py --explain`) and for operators reading a slow call.
//!
//! Stages are noted into the calling task only; work on other tasks is timed where it is
//! awaited. Stages that run side by side (an element list beside a capture) each count their
//! own time, so their sum may exceed the call's.

use std::cell::RefCell;
use std::fmt::Write;
use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    static STAGES: RefCell<Timings>;
}

/// The stages of one call, in the order first noted: their total time and how often each ran.
#[derive(Debug, Default, Clone)]
pub struct Timings {
    stages: Vec<Stage>,
    /// The whole call, once it ended.
    total: Duration,
}

#[derive(Debug, Clone)]
struct Stage {
    name: String,
    took: Duration,
    count: u32,
}

impl Timings {
    /// Adds `took` to stage `name` (after the call: what a front did with its output).
    pub fn add(&mut self, name: &str, took: Duration) {
        self.add_named("", name, took);
    }

    /// Adds `took` to stage `kind` + `name`; the name is built only for a stage not seen yet.
    fn add_named(&mut self, kind: &str, name: &str, took: Duration) {
        let same = |stage: &&mut Stage| {
            stage.name.len() == kind.len() + name.len()
                && stage.name.starts_with(kind)
                && stage.name.ends_with(name)
        };
        match self.stages.iter_mut().find(same) {
            Some(stage) => {
                stage.took += took;
                stage.count += 1;
            }
            None => self.stages.push(Stage {
                name: format!("{kind}{name}"),
                took,
                count: 1,
            }),
        }
    }

    /// The `Server-Timing` value: `total;dur=…` then each stage as a token, its milliseconds
    /// and, when it ran more than once, how often (`cdp-evaluating;dur=3.1;desc="x4"`).
    pub fn server_timing(&self) -> String {
        let mut header = format!("total;dur={:.1}", millis(self.total));
        for stage in &self.stages {
            let _ = write!(
                header,
                ", {};dur={:.1}",
                token(&stage.name),
                millis(stage.took)
            );
            if stage.count > 1 {
                let _ = write!(header, ";desc=\"x{}\"", stage.count);
            }
        }
        header
    }
}

fn millis(took: Duration) -> f64 {
    took.as_secs_f64() * 1000.0
}

/// A stage name as an HTTP token: letters and digits, anything else a dash.
fn token(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Runs `work` with a fresh record of stages, and gives the record back with its output.
pub async fn recorded<F: Future>(work: F) -> (F::Output, Timings) {
    let started = Instant::now();
    STAGES
        .scope(RefCell::new(Timings::default()), async move {
            let output = work.await;
            let mut timings = STAGES.with(|stages| stages.take());
            timings.total = started.elapsed();
            (output, timings)
        })
        .await
}

/// Notes that `name` took `took` in the current call (nothing outside a recorded call).
pub fn note(name: &str, took: Duration) {
    let _ = STAGES.try_with(|stages| stages.borrow_mut().add(name, took));
}

/// Times a stage from now until the guard is dropped, however the stage ends (done, failed,
/// or its future dropped): `let _stage = timing::stage("elements");`.
pub fn stage(name: &str) -> StageGuard<'_> {
    StageGuard {
        kind: "",
        name,
        started: Instant::now(),
    }
}

/// A CDP round trip timed as a stage named by what it was for (`cdp capturing`). Nothing is
/// allocated for it outside a recorded call, nor for a round trip already seen in this one.
pub fn cdp_stage(what: &str) -> StageGuard<'_> {
    StageGuard {
        kind: "cdp ",
        ..stage(what)
    }
}

/// A stage being timed; see [`stage`].
pub struct StageGuard<'a> {
    kind: &'static str,
    name: &'a str,
    started: Instant,
}

impl Drop for StageGuard<'_> {
    fn drop(&mut self) {
        let took = self.started.elapsed();
        let _ = STAGES.try_with(|stages| stages.borrow_mut().add_named(self.kind, self.name, took));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stages_add_up_by_name_and_read_as_server_timing() {
        let ((), mut timings) = recorded(async {
            note("cdp capturing", Duration::from_millis(30));
            note("settle", Duration::from_millis(5));
            note("cdp capturing", Duration::from_millis(2));
        })
        .await;
        timings.total = Duration::from_millis(40);
        assert_eq!(
            timings.server_timing(),
            "total;dur=40.0, cdp-capturing;dur=32.0;desc=\"x2\", settle;dur=5.0"
        );
    }

    #[tokio::test]
    async fn a_cdp_stage_is_named_by_its_purpose_and_counted() {
        let ((), timings) = recorded(async {
            for _ in 0..3 {
                let _stage = cdp_stage("capturing");
            }
        })
        .await;
        let header = timings.server_timing();
        assert!(header.contains(", cdp-capturing;dur="), "{header}");
        assert!(header.ends_with(";desc=\"x3\""), "{header}");
    }

    #[tokio::test]
    async fn outside_a_recorded_call_nothing_is_noted() {
        note("stray", Duration::from_millis(1));
        let ((), mut timings) = recorded(async {}).await;
        timings.total = Duration::ZERO;
        assert_eq!(timings.server_timing(), "total;dur=0.0");
    }
}
