//! Consent walls: the dialogs of consent-management platforms (OneTrust, Cookiebot, Didomi,
//! Quantcast, Usercentrics, Sourcepoint's TCF frames and hundreds more, and generic patterns)
//! answered after a navigation by DuckDuckGo's autoconsent, bundled from `assets/autoconsent/`:
//! its content script runs in the page's top document and in every frame of another site, with
//! the rules that apply to each document's URL, and says what it did.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::frames::Doc;
use super::tab::Tab;
use crate::config::ConsentChoice;

const BUNDLE: &str = include_str!("../../assets/autoconsent/autoconsent.cjs.js");
const RULES: &str = include_str!("../../assets/autoconsent/rules.json");
const CONSENT_JS: &str = include_str!("consent.js");
/// How often the documents are asked how far they got.
const POLL: Duration = Duration::from_millis(40);

/// What was done about a consent dialog.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ConsentAnswer {
    /// The consent platform, as autoconsent's rules name it (`didomi`, `Sourcepoint-frame`).
    pub cmp: String,
    pub action: ConsentAction,
    /// The frame's origin, when the dialog was in another site's frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConsentAction {
    Rejected,
    Accepted,
    /// Hidden without a choice (the dialog offers none to make).
    Hidden,
    /// The dialog's steps did not work.
    Failed,
    /// Still at it when the page was handed back.
    Pending,
}

/// autoconsent's rules, split by whether they name the sites they are for.
struct Rules {
    /// Rules for any site: JSON array items, without the brackets.
    anywhere: String,
    /// Rules for the sites whose URL matches.
    sited: Vec<(Regex, String)>,
}

static PARSED: LazyLock<Rules> = LazyLock::new(|| {
    let all: Value = serde_json::from_str(RULES).unwrap_or_default();
    let mut anywhere = Vec::new();
    let mut sited = Vec::new();
    for rule in all["autoconsent"].as_array().into_iter().flatten() {
        let text = rule.to_string();
        match rule["runContext"]["urlPattern"].as_str() {
            Some(pattern) => {
                if let Ok(pattern) = Regex::new(pattern) {
                    sited.push((pattern, text));
                }
            }
            None => anywhere.push(text),
        }
    }
    Rules {
        anywhere: anywhere.join(","),
        sited,
    }
});

/// The content script as an expression whose value is its `AutoConsent` class.
static CLASS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "(function () {{ var module = {{ exports: {{}} }}; var exports = module.exports;\n{BUNDLE}\n;return module.exports.default; }})()"
    )
});

/// The rules that apply to a document at `url`, as a JSON array.
fn rules_for(url: &str) -> String {
    let rules = &*PARSED;
    let mut out = String::with_capacity(rules.anywhere.len() + 2);
    out.push('[');
    out.push_str(&rules.anywhere);
    for (pattern, rule) in &rules.sited {
        if pattern.is_match(url) {
            out.push(',');
            out.push_str(rule);
        }
    }
    out.push(']');
    out
}

fn config_for(choice: ConsentChoice) -> Value {
    let (action, heuristics) = match choice {
        ConsentChoice::Accept => ("optIn", "off"),
        _ => ("optOut", "reject"),
    };
    json!({
        "enabled": true,
        "autoAction": action,
        "disabledCmps": [],
        // The page has loaded already: nothing to hide before it shows.
        "enablePrehide": false,
        "enableCosmeticRules": true,
        "enableGeneratedRules": true,
        // One look, rules and generic patterns together (see consent.js): a navigation waits
        // for it, and a page without a dialog must not pay for more.
        "detectRetries": 0,
        "isMainWorld": true,
        "prehideTimeout": 2000,
        "enableHeuristicDetection": true,
        "enablePopupMutationObserver": false,
        "visualTest": false,
        "heuristicMode": heuristics,
        "logs": { "lifecycle": false, "rulesteps": false, "detectionsteps": false, "evals": false,
                  "errors": false, "messages": false, "waits": false },
    })
}

/// How far one document got.
#[derive(Debug, Default, Deserialize)]
struct Progress {
    #[serde(default)]
    lifecycle: String,
    #[serde(default)]
    popup: Option<String>,
    #[serde(default)]
    result: Option<Outcome>,
    #[serde(default)]
    done: Option<Finished>,
    #[serde(default)]
    detected: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Outcome {
    cmp: String,
    ok: bool,
    out: bool,
}

#[derive(Debug, Deserialize)]
struct Finished {
    cmp: String,
    cosmetic: bool,
}

impl Progress {
    /// What was done, once it is over; None while it goes on or when nothing was found.
    fn answer(&self) -> Option<ConsentAnswer> {
        if let Some(done) = &self.done {
            let action = match &self.result {
                _ if done.cosmetic => ConsentAction::Hidden,
                Some(result) if !result.ok => ConsentAction::Failed,
                Some(result) if !result.out => ConsentAction::Accepted,
                _ => ConsentAction::Rejected,
            };
            return Some(ConsentAnswer {
                cmp: done.cmp.clone(),
                action,
                frame: None,
            });
        }
        match &self.result {
            Some(result) if !result.ok => Some(ConsentAnswer {
                cmp: result.cmp.clone(),
                action: ConsentAction::Failed,
                frame: None,
            }),
            _ => None,
        }
    }

    /// Nothing more will happen here.
    fn over(&self) -> bool {
        self.answer().is_some() || self.lifecycle == "nothingDetected"
    }
}

/// What was last seen of one document.
#[derive(Debug, Default)]
struct Seen {
    progress: Progress,
    /// The document went away: a dialog in its own frame is removed once it is answered.
    gone: bool,
}

impl Seen {
    fn answer(&self, choice: ConsentChoice) -> Option<ConsentAnswer> {
        if let Some(answer) = self.progress.answer() {
            return Some(answer);
        }
        // Its steps were running when the page took the dialog's frame away: they worked.
        let running = matches!(
            self.progress.lifecycle.as_str(),
            "runningOptOut" | "runningOptIn"
        );
        let cmp = self.progress.popup.clone()?;
        (self.gone && running).then_some(ConsentAnswer {
            cmp,
            action: match choice {
                ConsentChoice::Accept => ConsentAction::Accepted,
                _ => ConsentAction::Rejected,
            },
            frame: None,
        })
    }

    fn over(&self) -> bool {
        self.gone || self.progress.over()
    }
}

impl Tab {
    /// Answers the consent dialogs of the page as it is now (its top document and its frames of
    /// other sites) as `choice` says, waiting at most `wait` for them to be answered.
    pub async fn answer_consent(
        &self,
        choice: ConsentChoice,
        wait: Duration,
    ) -> Option<ConsentAnswer> {
        if choice == ConsentChoice::Leave {
            return None;
        }
        let deadline = Instant::now() + wait;
        let mut docs = vec![Doc::Top];
        docs.extend(self.frames.remote_docs());
        let config = config_for(choice);
        let mut running = Vec::new();
        for doc in docs {
            if let Some(origin) = self.start_consent(&doc, &config).await {
                running.push((doc, origin));
            }
        }
        let mut seen: Vec<Seen> = running.iter().map(|_| Seen::default()).collect();
        loop {
            for ((doc, _), seen) in running.iter().zip(seen.iter_mut()) {
                if !seen.gone {
                    match self.consent_progress(doc).await {
                        Some(progress) => seen.progress = progress,
                        None => seen.gone = true,
                    }
                }
            }
            let answered = seen.iter().zip(&running).find_map(|(seen, (doc, origin))| {
                seen.answer(choice).map(|mut answer| {
                    answer.frame = (*doc != Doc::Top).then(|| origin.clone());
                    answer
                })
            });
            if answered.is_some() {
                return answered;
            }
            if seen.iter().all(Seen::over) || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        // Time is up: a dialog being answered still is said so.
        seen.iter().zip(&running).find_map(|(seen, (doc, origin))| {
            let progress = &seen.progress;
            let cmp = progress
                .popup
                .clone()
                .or_else(|| progress.detected.first().cloned())?;
            Some(ConsentAnswer {
                cmp,
                action: ConsentAction::Pending,
                frame: (*doc != Doc::Top).then(|| origin.clone()),
            })
        })
    }

    /// Starts autoconsent in `doc` with the rules for its URL; its origin, or None when the
    /// document cannot run it (gone, not a web page).
    async fn start_consent(&self, doc: &Doc, config: &Value) -> Option<String> {
        let place = self
            .evaluate_in(doc, "[location.href, location.origin]", None)
            .await
            .ok()?;
        let url = place[0].as_str()?;
        if !url.starts_with("http") {
            return None;
        }
        let origin = place[1].as_str().unwrap_or_default().to_string();
        let start = format!("({CONSENT_JS})({}, {config}, {})", &*CLASS, rules_for(url));
        self.evaluate_in(doc, &start, None).await.ok()?;
        Some(origin)
    }

    /// How far `doc` got; None once it is gone (or has another document).
    async fn consent_progress(&self, doc: &Doc) -> Option<Progress> {
        let state = "window.__wpConsent ? window.__wpConsent.state : null";
        let value = self.evaluate_in(doc, state, None).await.ok()?;
        serde_json::from_value(value).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_for_a_site_are_the_general_ones_and_its_own() {
        let names = |url: &str| -> Vec<String> {
            let rules: Vec<Value> = serde_json::from_str(&rules_for(url)).unwrap();
            rules
                .iter()
                .filter_map(|r| r["name"].as_str().map(str::to_string))
                .collect()
        };
        let anywhere = names("https://example.test/");
        for cmp in ["didomi", "quantcast", "usercentrics-api"] {
            assert!(
                anywhere.iter().any(|n| n == cmp),
                "{cmp} missing: {anywhere:?}"
            );
        }
        // A rule for one site (`^https?://(www\\.)?example\\.com/`) comes with that site only.
        let (host, rule) = PARSED
            .sited
            .iter()
            .find_map(|(pattern, rule)| {
                let host = pattern.as_str().strip_prefix(r"^https?://(www\.)?")?;
                let host = host.split('/').next()?.replace(r"\.", ".");
                host.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                    .then_some((host, rule))
            })
            .expect("a rule for one site");
        let name = serde_json::from_str::<Value>(rule).unwrap()["name"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(names(&format!("https://{host}/")).contains(&name));
        assert!(!anywhere.contains(&name));
    }
}
