//! The operator's rules for actions (`[actions]`, narrowed per tenant): a denied action is
//! refused before it runs; one to confirm is held until a person allows it in the session's
//! live view or the console. The agent repeats the call with the question's id, or waits for
//! the answer with `wait: true` (reporting to the front like a hand-off). A front whose client
//! opens links for its user (MCP URL elicitation) gets the question's link that way, and the
//! call waits for the answer as with `wait: true`; the user's decline ends the wait.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Action, InteractArgs};
use crate::browser::live::LiveHub;
use crate::browser::live::{Answer, CONFIRMATION_LIFETIME, Confirmation};
use crate::browser::{Submission, SubmitBy};
use crate::error::{ConfirmationAsk, ErrorCode, ToolError, ToolResult};
use crate::tenancy::actions::Ruling;
use crate::tools::{Call, HandoffProgress, LinkOpener, SentLink};

/// How often a call waiting for an answer reports to the front.
const REPORT_EVERY: Duration = Duration::from_secs(5);
/// Longest script shown to the person asked.
const SHOWN_SCRIPT_CHARS: usize = 300;
/// The rule naming a form sent to another site.
const SUBMIT_CROSS_SITE: &str = "submit_cross_site";

/// Lets the call go on when the rules allow it (or a person has); refuses it otherwise.
pub(super) async fn under_rules(call: &mut Call<'_>, args: &InteractArgs) -> ToolResult<()> {
    let rules = call.tenant().actions().clone();
    let action = action_name(args.action);
    let submission = if rules.names(SUBMIT_CROSS_SITE) {
        cross_site_submission(call, args).await?
    } else {
        None
    };
    let mut names = vec![action.as_str()];
    if submission.is_some() {
        names.push(SUBMIT_CROSS_SITE);
    }
    match rules.judge(&names) {
        Ruling::Allowed => Ok(()),
        Ruling::Denied(rule) => {
            let what = describe(call, args, submission.as_ref()).await;
            Err(ToolError::new(
                ErrorCode::ForbiddenAction,
                format!("{what}: the operator's rule actions.deny = [{rule:?}] refuses it"),
            ))
        }
        Ruling::Confirm(rule) => {
            let what = describe(call, args, submission.as_ref()).await;
            confirmed(call, args, rule, what).await
        }
    }
}

/// The action as the rules name it (`send_keys`).
fn action_name(action: Action) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|name| name.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The form this call would send to another site, if it sends one.
async fn cross_site_submission(
    call: &mut Call<'_>,
    args: &InteractArgs,
) -> ToolResult<Option<Submission>> {
    let by = match args.action {
        Action::Click => SubmitBy::Click,
        Action::Type if args.submit == Some(true) => SubmitBy::Enter,
        Action::SendKeys
            if args
                .keys
                .as_deref()
                .is_some_and(|keys| keys.split_whitespace().any(|k| k == "Enter")) =>
        {
            SubmitBy::Enter
        }
        _ => return Ok(None),
    };
    let Some(ref_id) = args.ref_id else {
        return Ok(None);
    };
    let tab = call.tab().await?;
    let Some(submission) = tab.submission(ref_id, by).await? else {
        return Ok(None);
    };
    let page = tab.url().await;
    Ok((!same_site(&page, &submission.action)).then_some(submission))
}

/// Whether two URLs are of one site: the same registrable domain, approximated as the host's
/// last two labels (three under a two-letter country code's second level, `example.co.uk`);
/// addresses and single names (`localhost`) only as themselves. A form going to `javascript:`
/// or `about:` sends nothing anywhere.
fn same_site(page: &str, target: &str) -> bool {
    let (Ok(page), Ok(target)) = (url::Url::parse(page), url::Url::parse(target)) else {
        return false;
    };
    if !matches!(target.scheme(), "http" | "https") {
        return true;
    }
    site(&page) == site(&target)
}

fn site(url: &url::Url) -> Option<String> {
    let host = match url.host()? {
        url::Host::Domain(name) => name.trim_end_matches('.').to_ascii_lowercase(),
        address => return Some(address.to_string()),
    };
    let labels: Vec<&str> = host.split('.').collect();
    let keep = match labels.as_slice() {
        [.., second, tld] if tld.len() == 2 && second.len() <= 3 && labels.len() > 2 => 3,
        _ => 2,
    };
    Some(labels[labels.len().saturating_sub(keep)..].join("."))
}

/// What the action would do, for the person asked and the agent refused.
async fn describe(
    call: &mut Call<'_>,
    args: &InteractArgs,
    submission: Option<&Submission>,
) -> String {
    let action = action_name(args.action);
    let mut what = match args.action {
        Action::Download => format!("download {}", args.url.as_deref().unwrap_or_default()),
        Action::PageTool => format!(
            "call the page's tool {:?}",
            args.text.as_deref().unwrap_or_default()
        ),
        Action::Evaluate => {
            let script = args.script.as_deref().unwrap_or_default();
            let shown: String = script.chars().take(SHOWN_SCRIPT_CHARS).collect();
            let cut = if shown.len() < script.len() {
                "…"
            } else {
                ""
            };
            format!("evaluate `{shown}{cut}`")
        }
        Action::Upload => {
            let names: Vec<&str> = (args.paths.iter().flatten().map(String::as_str))
                .chain(args.files.iter().flatten().map(|f| f.name.as_str()))
                .collect();
            format!("upload {}", names.join(", "))
        }
        _ => action,
    };
    if let Some(ref_id) = args.ref_id {
        let element = match call.tab().await {
            Ok(tab) => tab.identify(ref_id).await,
            Err(_) => None,
        };
        match element {
            Some(element) => what.push_str(&format!(" on [{ref_id}] {}", element.label())),
            None => what.push_str(&format!(" on [{ref_id}]")),
        }
    }
    if let Some(sent) = submission {
        what.push_str(&format!(
            ", which sends a form ({}) to another site: {}",
            sent.method.to_uppercase(),
            sent.action
        ));
    }
    what
}

/// Goes on once a person has allowed this very call; asks them otherwise.
async fn confirmed(
    call: &mut Call<'_>,
    args: &InteractArgs,
    rule: String,
    what: String,
) -> ToolResult<()> {
    let hub = call.live_side().await?;
    let fingerprint = fingerprint(call, args);
    let asked = match args
        .confirmation
        .as_deref()
        .and_then(|id| hub.confirmations().take(id, fingerprint))
    {
        Some((_, Answer::Allowed)) => return Ok(()),
        Some((confirmation, Answer::Refused)) => return Err(refused(&confirmation)),
        Some((confirmation, Answer::Pending)) => confirmation,
        // None asked yet, or the answer was for another call, or it lapsed: ask now.
        None => hub.confirmations().ask(what, rule, fingerprint),
    };
    let ask = ask_of(call, &asked)?;
    let opener = call.link_opener();
    if args.wait != Some(true) && opener.is_none() {
        return Err(needs_confirmation(
            &asked,
            ask,
            "a person must allow it first",
        ));
    }
    let sent = opener.map(|opener| {
        call.waiting_for_person();
        send_to_client(opener, &asked, &ask.confirm_url)
    });
    let answer = match &sent {
        Some((_, declined)) => tokio::select! {
            answer = answered(call, &hub, &asked, &ask) => Some(answer),
            () = declined.notified() => None,
        },
        None => Some(answered(call, &hub, &asked, &ask).await),
    };
    if let Some((sent, _)) = sent {
        sent.finish().await;
    }
    match answer {
        Some(Answer::Allowed) => {
            hub.confirmations().take(&asked.id, fingerprint);
            Ok(())
        }
        Some(Answer::Refused) => {
            hub.confirmations().take(&asked.id, fingerprint);
            Err(refused(&asked))
        }
        Some(Answer::Pending) => Err(needs_confirmation(
            &asked,
            ask,
            "no one answered in time; the question stays open",
        )),
        None => Err(needs_confirmation(
            &asked,
            ask,
            "the person declined to open the link; the question stays open",
        )),
    }
}

/// The person's answer, or `Pending` once the call's time is up; the wait is reported to the
/// front every few seconds, like a hand-off's.
async fn answered(
    call: &Call<'_>,
    hub: &LiveHub,
    asked: &Confirmation,
    ask: &ConfirmationAsk,
) -> Answer {
    let started = Instant::now();
    loop {
        call.report(HandoffProgress {
            session: call.session_name().to_string(),
            message: format!("Allow? {}", asked.what),
            live_url: ask.confirm_url.clone(),
            waited_ms: started.elapsed().as_millis() as u64,
        });
        let next = (Instant::now() + REPORT_EVERY).min(call.ends());
        let answer = hub.confirmations().answered(&asked.id, next.into()).await;
        if answer != Answer::Pending || Instant::now() >= call.ends() {
            return answer;
        }
    }
}

/// A question's link sent to a client that opens links for its user, and what its user's
/// decline wakes.
fn send_to_client(
    opener: Arc<dyn LinkOpener>,
    asked: &Confirmation,
    url: &str,
) -> (SentLink, Arc<Notify>) {
    let declined = Arc::new(Notify::new());
    let said_no = declined.clone();
    let message = format!("Allow? {}", asked.what);
    let sent = SentLink::send(opener, "confirm-", message, url.into(), move || {
        said_no.notify_one()
    });
    (sent, declined)
}

/// Identifies the call across repeats: the same action on the same thing, in the same session.
fn fingerprint(call: &Call<'_>, args: &InteractArgs) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    call.session_name().as_str().hash(&mut hasher);
    action_name(args.action).hash(&mut hasher);
    (args.ref_id, &args.tab, &args.text, &args.keys, &args.option).hash(&mut hasher);
    (
        &args.paths,
        &args.url,
        &args.filename,
        &args.script,
        args.submit,
    )
        .hash(&mut hasher);
    for file in args.files.iter().flatten() {
        (&file.name, &file.base64).hash(&mut hasher);
    }
    hasher.finish()
}

fn ask_of(call: &Call<'_>, asked: &Confirmation) -> ToolResult<ConfirmationAsk> {
    let link = call.live_link()?;
    let mut confirm_url = url::Url::parse(&link.live_url)
        .map_err(|e| ToolError::internal(format!("live link: {e}")))?;
    confirm_url
        .query_pairs_mut()
        .append_pair("confirm", &asked.id);
    let lapses = asked
        .expires
        .saturating_duration_since(tokio::time::Instant::now())
        .min(CONFIRMATION_LIFETIME);
    let expires_at = (std::time::SystemTime::now() + lapses)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    Ok(ConfirmationAsk {
        id: asked.id.clone(),
        confirm_url: confirm_url.into(),
        what: asked.what.clone(),
        rule: asked.rule.clone(),
        expires_at: crate::tenancy::links::rfc3339(expires_at),
    })
}

fn needs_confirmation(asked: &Confirmation, ask: ConfirmationAsk, why: &str) -> ToolError {
    let mut error = ToolError::new(
        ErrorCode::NeedsConfirmation,
        format!(
            "{}: {why} (the operator's rule actions.confirm = [{:?}])",
            asked.what, asked.rule
        ),
    )
    .with_hint(format!(
        "send the person {} ; once they allow it, repeat this call with confirmation: {:?} \
         (or with wait: true to wait for them)",
        ask.confirm_url, asked.id
    ));
    error.confirmation = Some(Box::new(ask));
    error
}

fn refused(asked: &Confirmation) -> ToolError {
    ToolError::new(
        ErrorCode::ForbiddenAction,
        format!("{}: a person refused it", asked.what),
    )
    .with_hint("do not try it again; reach the goal another way or ask the person why")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_registrable_domains() {
        assert!(same_site(
            "https://shop.example.com/a",
            "https://pay.example.com/b"
        ));
        assert!(!same_site("https://example.com/", "https://example.org/"));
        assert!(same_site(
            "http://a.example.co.uk/",
            "https://b.example.co.uk/"
        ));
        assert!(!same_site(
            "http://a.example.co.uk/",
            "https://other.co.uk/"
        ));
        assert!(same_site("http://127.0.0.1:1/", "http://127.0.0.1:2/x"));
        assert!(!same_site("http://127.0.0.1:1/", "http://localhost:1/x"));
        assert!(same_site("http://127.0.0.1:1/", "javascript:void(0)"));
    }
}
