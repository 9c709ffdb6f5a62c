//! Consent walls: the dialogs of consent-management platforms (OneTrust, Cookiebot, Didomi,
//! Quantcast, Usercentrics, Sourcepoint's TCF frames and hundreds more, and generic patterns)
//! answered after a navigation by DuckDuckGo's autoconsent, bundled from `assets/autoconsent/`:
//! its content script runs in the page's top document and in every frame of another site, with
//! the rules that apply to each document's URL, and says what it did.

use std::sync::LazyLock;
use std::time::Duration;

use regex::bytes::{RegexSet, RegexSetBuilder};
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
const PROBE_JS: &str = include_str!("consent_probe.js");
/// How often the documents are asked how far they got (one alone is asked to say when it
/// changes, within this).
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
    /// Selectors one of which a document must have for a rule for any site to find its dialog
    /// there (see `PROBE`).
    anywhere_selectors: Vec<String>,
    /// Rules for some sites: each for the URLs its pattern in `sites` (same index) matches.
    sited: Vec<String>,
    /// The sited rules' URL patterns as one set, matched on a URL's bytes with ASCII classes
    /// (URLs are ASCII). Compiled one by one with Unicode classes, the 597 patterns and their
    /// match caches held 16 MiB, a quarter of the service's memory.
    sites: RegexSet,
}

static PARSED: LazyLock<Rules> = LazyLock::new(|| {
    let all: Value = serde_json::from_str(RULES).unwrap_or_default();
    let (mut anywhere, mut anywhere_selectors) = (Vec::new(), Vec::new());
    let mut sited = Vec::new();
    for rule in all["autoconsent"].as_array().into_iter().flatten() {
        let text = rule.to_string();
        match rule["runContext"]["urlPattern"].as_str() {
            Some(pattern) => sited.push((pattern.to_string(), text)),
            None => {
                anywhere.push(text);
                let needed = rule["detectCmp"]
                    .as_array()
                    .and_then(|steps| needed_selectors(steps));
                anywhere_selectors.extend(needed.into_iter().flatten());
            }
        }
    }
    anywhere_selectors.sort_unstable();
    anywhere_selectors.dedup();
    let (sites, sited) = site_set(sited);
    Rules {
        anywhere: anywhere.join(","),
        anywhere_selectors,
        sited,
        sites,
    }
});

/// The set of the rules' URL patterns, and the rules in the set's order. A pattern the set
/// cannot hold would fail the whole set: then each is tried alone (compiling 597 patterns one
/// by one costs memory the process keeps), and those that fail are left out.
fn site_set(sited: Vec<(String, String)>) -> (RegexSet, Vec<String>) {
    let build = |patterns: &[&String]| {
        let mut builder = RegexSetBuilder::new(patterns);
        builder.unicode(false);
        builder.build()
    };
    let patterns: Vec<&String> = sited.iter().map(|(pattern, _)| pattern).collect();
    if let Ok(set) = build(&patterns) {
        return (set, sited.into_iter().map(|(_, rule)| rule).collect());
    }
    let valid: Vec<(String, String)> = sited
        .into_iter()
        .filter(|(pattern, _)| build(&[pattern]).is_ok())
        .collect();
    let patterns: Vec<&String> = valid.iter().map(|(pattern, _)| pattern).collect();
    let set = build(&patterns).unwrap_or_else(|_| RegexSet::empty());
    (set, valid.into_iter().map(|(_, rule)| rule).collect())
}

/// What a document must have for autoconsent to find anything in it, as a script: one of the
/// selectors each rule for any site needs to detect its dialog, or (in the top document, for
/// autoconsent's generic patterns) text such a dialog says, matched with autoconsent's own
/// patterns. A document with neither is not given the 260 KB content script: most pages have
/// no consent dialog, and a navigation should not pay for looking.
static PROBE: LazyLock<String> = LazyLock::new(|| {
    let selectors =
        serde_json::to_string(&PARSED.anywhere_selectors).unwrap_or_else(|_| "[]".into());
    format!(
        "(function (top) {{ var selectors = {selectors}; var patterns = [{patterns}];\n{PROBE_JS}\nreturn [location.href, location.origin, maybe(top)]; }})",
        patterns = detect_patterns(),
    )
});

/// Selectors one of which must be in a document for a rule to detect its dialog there: those of
/// a step that must hold (`exists`, `visible`), or of every branch of an `any`; None when the
/// rule's steps need none (they only evaluate script).
fn needed_selectors(steps: &[Value]) -> Option<Vec<String>> {
    let selector = |step: &Value| -> Option<String> {
        let target = if step["exists"].is_null() {
            &step["visible"]
        } else {
            &step["exists"]
        };
        match target {
            Value::String(selector) => Some(selector.clone()),
            // A chain into shadow roots: its first selector is in the document itself.
            Value::Array(chain) => chain.first()?.as_str().map(str::to_string),
            _ => None,
        }
    };
    steps
        .iter()
        .filter(|step| step["negated"] != true && step["optional"] != true)
        .find_map(|step| match step["any"].as_array() {
            Some(branches) => branches.iter().map(selector).collect(),
            None => selector(step).map(|one| vec![one]),
        })
}

/// autoconsent's generic patterns (`DETECT_PATTERNS`, regular expression literals), as the
/// items of a JavaScript array.
fn detect_patterns() -> String {
    let Some(start) = BUNDLE.find("var DETECT_PATTERNS = [") else {
        return String::new();
    };
    let list = &BUNDLE[start..];
    let list = &list[list.find('\n').unwrap_or(0)..list.find("\n];").unwrap_or(0)];
    list.lines()
        .map(str::trim)
        .filter(|line| line.starts_with('/') && !line.starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether rules of its own apply to a document at `url`.
fn has_own_rules(url: &str) -> bool {
    PARSED.sites.is_match(url.as_bytes())
}

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
    for index in rules.sites.matches(url.as_bytes()) {
        out.push(',');
        out.push_str(&rules.sited[index]);
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
    /// Counts the document's changes: the next look waits for one past it.
    #[serde(default)]
    version: u64,
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
    /// other sites) as `choice` says, waiting at most `wait` for them to be answered; once one
    /// was, waits (within `time_left`) for the page to settle after what the answer started.
    pub async fn answer_consent(
        &self,
        choice: ConsentChoice,
        wait: Duration,
        time_left: Duration,
    ) -> Option<ConsentAnswer> {
        let _stage = crate::timing::stage("consent");
        if choice == ConsentChoice::Leave {
            return None;
        }
        let deadline = Instant::now() + wait;
        let mut docs = vec![Doc::Top];
        docs.extend(self.frames.remote_docs());
        let mut candidates = Vec::new();
        for doc in docs {
            if let Some(place) = self.consent_candidate(&doc).await {
                candidates.push((doc, place));
            }
        }
        if candidates.is_empty() {
            return None;
        }
        let mark = self.begin_action(None).await;
        let answer = self.run_consent(choice, candidates, deadline).await;
        if answer
            .as_ref()
            .is_some_and(|answer| answer.action != ConsentAction::Pending)
        {
            let _ = self
                .settle_after_action(&mark, super::settle::Watch::Action, time_left)
                .await;
        }
        answer
    }

    /// Runs autoconsent in each of `candidates` (a document with its URL and origin) until one
    /// answered a dialog, all are done or `deadline` passed.
    async fn run_consent(
        &self,
        choice: ConsentChoice,
        candidates: Vec<(Doc, (String, String))>,
        deadline: Instant,
    ) -> Option<ConsentAnswer> {
        let config = config_for(choice);
        let mut running = Vec::new();
        for (doc, (url, origin)) in candidates {
            if self.start_consent(&doc, &url, &config).await {
                running.push((doc, origin));
            }
        }
        let mut seen: Vec<Seen> = running.iter().map(|_| Seen::default()).collect();
        let _stage = crate::timing::stage("consent until answered");
        // One document is waited on until it changes; several are looked at in turn.
        let alone = running.len() == 1;
        let wait = if alone { POLL } else { Duration::ZERO };
        loop {
            for ((doc, _), seen) in running.iter().zip(seen.iter_mut()) {
                if !seen.gone {
                    let wait = wait.min(deadline.saturating_duration_since(Instant::now()));
                    match self
                        .consent_progress(doc, seen.progress.version, wait)
                        .await
                    {
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
            if !alone {
                tokio::time::sleep(POLL).await;
            }
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

    /// A document autoconsent may find a dialog in (its URL has rules of its own, or it shows
    /// what a rule or a generic pattern needs): its URL and origin; None otherwise, or when it
    /// is not a web page.
    async fn consent_candidate(&self, doc: &Doc) -> Option<(String, String)> {
        let _stage = crate::timing::stage("consent probe");
        let probe = format!("{}({})", &*PROBE, *doc == Doc::Top);
        let place = self.evaluate_in(doc, &probe, None).await.ok()?;
        let url = place[0].as_str()?;
        if !url.starts_with("http") {
            return None;
        }
        let maybe = place[2].as_bool() == Some(true) || has_own_rules(url);
        let origin = place[1].as_str().unwrap_or_default().to_string();
        maybe.then(|| (url.to_string(), origin))
    }

    /// Starts autoconsent in `doc` (at `url`) with the rules for its URL; false when it could
    /// not (the document went away).
    async fn start_consent(&self, doc: &Doc, url: &str, config: &Value) -> bool {
        let _stage = crate::timing::stage("consent start");
        let start = format!("({CONSENT_JS})({}, {config}, {})", &*CLASS, rules_for(url));
        self.evaluate_in(doc, &start, None).await.is_ok()
    }

    /// How far `doc` got, once it changed since `version` or `wait` passed; None once it is
    /// gone (or has another document).
    async fn consent_progress(&self, doc: &Doc, version: u64, wait: Duration) -> Option<Progress> {
        let state = format!(
            "window.__wpConsent ? window.__wpConsent.next({version}, {}) : null",
            wait.as_millis()
        );
        let value = self.evaluate_in(doc, &state, None).await.ok()?;
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
            .sites
            .patterns()
            .iter()
            .zip(&PARSED.sited)
            .find_map(|(pattern, rule)| {
                let host = pattern.strip_prefix(r"^https?://(www\.)?")?;
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
        assert!(has_own_rules(&format!("https://{host}/")));
        assert!(!has_own_rules("https://example.test/"));
    }

    #[test]
    fn every_sited_rule_is_in_the_set_and_classes_match_as_in_javascript() {
        let all: Value = serde_json::from_str(RULES).unwrap();
        let sited = all["autoconsent"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| rule["runContext"]["urlPattern"].is_string())
            .count();
        assert!(sited > 500, "{sited}");
        assert_eq!(PARSED.sited.len(), sited);
        assert_eq!(PARSED.sites.len(), sited);
        // `\w`, `[a-z]*` and `[^/]` in patterns, as JavaScript's RegExp reads them.
        for (url, cmp) in [
            ("https://store.dji.com/", "dji"),
            ("https://www.amazon.de/gp", "amazon"),
            ("https://portal.eltax.lta.go.jp/", "eltax"),
        ] {
            let rules: Value = serde_json::from_str(&rules_for(url)).unwrap();
            let named = rules.as_array().unwrap().iter().any(|rule| {
                rule["name"]
                    .as_str()
                    .is_some_and(|name| name.to_lowercase().contains(cmp))
            });
            assert!(named, "{url}: no rule named like {cmp}");
        }
        assert!(!has_own_rules("https://dji.com.example.test/"));
    }

    #[test]
    fn a_pattern_the_set_cannot_hold_leaves_out_its_rule_only() {
        let sited = [
            ("^https://a\\.test/", "a"),
            ("(unclosed", "bad"),
            ("^https://b\\.", "b"),
        ]
        .map(|(pattern, rule)| (pattern.to_string(), rule.to_string()));
        let (set, rules) = site_set(sited.to_vec());
        assert_eq!(rules, ["a", "b"]);
        let matched: Vec<usize> = set.matches(b"https://b.test/").into_iter().collect();
        assert_eq!(matched, [1]);
    }

    #[test]
    fn the_probe_knows_the_rules_selectors_and_the_generic_patterns() {
        let didomi = serde_json::json!([{ "exists": "#didomi-host" }, { "visible": "#x" }]);
        assert_eq!(
            needed_selectors(didomi.as_array().unwrap()),
            Some(vec!["#didomi-host".into()])
        );
        let any = serde_json::json!([{ "exists": "#gone", "negated": true },
            { "any": [{ "exists": ["#host", "#inner"] }, { "visible": "#banner" }] }]);
        assert_eq!(
            needed_selectors(any.as_array().unwrap()),
            Some(vec!["#host".to_string(), "#banner".to_string()])
        );
        let eval_only = serde_json::json!([{ "eval": "EVAL_X" }]);
        assert_eq!(needed_selectors(eval_only.as_array().unwrap()), None);
        let patterns = detect_patterns();
        assert!(patterns.contains("/accept cookies/gi"), "{patterns}");
        assert!(patterns.lines().count() > 50, "{patterns}");
        assert!(PROBE.contains("#didomi-host"), "Didomi's selector");
    }

    #[test]
    fn the_probe_knows_each_of_autoconsent_s_own_cmp_classes() {
        let start = BUNDLE
            .find("var dynamicCMPs = [")
            .expect("autoconsent's own CMPs");
        let list = &BUNDLE[start..];
        let list = &list[..list.find("];").unwrap()];
        let classes: Vec<&str> = list
            .lines()
            .skip(1)
            .map(|line| line.trim().trim_end_matches(','))
            .filter(|name| !name.is_empty())
            .collect();
        assert!(classes.len() >= 10, "{classes:?}");
        for class in classes {
            assert!(
                PROBE_JS.contains(&format!("{class}: function")),
                "consent_probe.js does not look for {class}, a CMP class of autoconsent's"
            );
        }
    }
}
