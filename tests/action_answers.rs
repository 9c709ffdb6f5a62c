//! What an action answers, on pages built like real sites and served by the test, which
//! records what it was asked for: a windowed list of 1,000 rows that reuses its nodes as it
//! scrolls (its scroll results stay within what the list itself costs), and forms inside a
//! same-origin and a cross-site frame, and links, forms and scripts that send a document into a
//! frame by name (each is answered once the frame's new document has loaded, so a read right
//! after shows it).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use axum::routing::get;
use common::{content_lines, element_lines, ok, page_text, ref_of};
use serde_json::{Value, json};
use webpilot::browser::OFFSCREEN_HEADER;

/// What the site was asked for, in order, and submissions counted per frame.
#[derive(Clone, Default)]
struct Seen {
    paths: Arc<Mutex<Vec<String>>>,
    answers: Arc<Mutex<HashMap<String, usize>>>,
}

impl Seen {
    /// Counts one more request for `who`, then takes the server's time over it: `who` and
    /// the count.
    async fn count(&self, who: &str) -> (String, usize) {
        let n = {
            let mut answers = self.answers.lock().unwrap();
            let n = answers.entry(who.to_string()).or_default();
            *n += 1;
            *n
        };
        tokio::time::sleep(SERVER_WORK).await;
        (who.to_string(), n)
    }
}

/// How long the site takes to answer a form, as a server doing work does: long enough that an
/// answer given before the frame's new document arrived would show the old one.
const SERVER_WORK: Duration = Duration::from_millis(60);

fn send_form(who: &str) -> String {
    format!(r#"<form method="post" action="/answer?who={who}"><button>Send {who}</button></form>"#)
}

/// The site on 127.0.0.1; `localhost` on the same port is another site to Chromium.
async fn site(seen: Seen) -> (String, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cross = format!("http://localhost:{port}");
    let host = format!(
        "<!doctype html><title>Host</title><h1>Host</h1>\
         <iframe src='/form?who=here' width=500 height=150></iframe>\
         <iframe src='{cross}/form?who=across' width=500 height=150></iframe>"
    );
    // Frames navigated from outside: by a link's target (a frame of the page, and one inside a
    // cross-site frame) and by a script that moves a frame a moment after the click.
    let panes = format!(
        "<!doctype html><title>Panes</title>\
         <a href='/slow?who=link' target=pane>Open in pane</a> \
         <a href='{cross}/slow?who=nested' target=inner>Open nested</a> \
         <button onclick=\"setTimeout(() => frames.pane.location.href = '/slow?who=script', 20)\">Move pane</button>\
         <form method=post action='{cross}/answer?who=posted' target=inner><button>Post nested</button></form>\
         <iframe name=pane src='/form?who=pane' width=500 height=150></iframe>\
         <iframe src='{cross}/nest' width=500 height=200></iframe>"
    );
    let app = axum::Router::new()
        .route(
            "/list",
            get(|| async { Html(include_str!("../fixtures/virtual-list.html")) }),
        )
        .route(
            "/orders/{n}",
            get(|State(seen): State<Seen>, Path(n): Path<u32>| async move {
                seen.paths.lock().unwrap().push(format!("/orders/{n}"));
                Html(format!(
                    "<!doctype html><title>Order {n}</title><h1>Order {n}</h1>"
                ))
            }),
        )
        .route("/host", get(move || async move { Html(host) }))
        .route("/panes", get(move || async move { Html(panes) }))
        .route(
            "/nest",
            get(|| async {
                Html("<!doctype html><title>Nest</title><iframe name=inner src='/form?who=inner'></iframe>")
            }),
        )
        .route(
            "/slow",
            get(
                |State(seen): State<Seen>, Query(q): Query<HashMap<String, String>>| async move {
                    let (who, n) = seen.count(&q["who"]).await;
                    Html(format!("<!doctype html><title>Slow</title><p>Slow {n} for {who}</p>"))
                },
            ),
        )
        .route(
            "/form",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                Html(format!(
                    "<!doctype html><title>Form</title>{}",
                    send_form(&q["who"])
                ))
            }),
        )
        .route(
            "/answer",
            axum::routing::post(
                |State(seen): State<Seen>, Query(q): Query<HashMap<String, String>>| async move {
                    let (who, n) = seen.count(&q["who"]).await;
                    Html(format!(
                        "<!doctype html><title>Answer</title><p>Answer {n} from {who}</p>{}",
                        send_form(&who)
                    ))
                },
            ),
        )
        .with_state(seen);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}"), cross)
}

async fn act(session: &str, mut args: Value) -> Value {
    args["session"] = json!(session);
    ok("browser_interact", args).await
}

/// The element lines an action's result tells: added, changed, or the list relisted.
fn told(result: &Value) -> Vec<String> {
    ["added", "changed", "relisted"]
        .iter()
        .filter_map(|field| result[field].as_str())
        .flat_map(str::lines)
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_windowed_list_is_scrolled_to_row_734_for_less_than_the_list_costs() {
    let seen = Seen::default();
    let (origin, _) = site(seen.clone()).await;
    let s = "virtual-list";
    ok(
        "browser_navigate",
        json!({ "session": s, "target": format!("{origin}/list") }),
    )
    .await;
    let first = element_lines(s).await;
    let order_1 = ref_of(&first, "\"Order 1\"");
    // The ref an agent was told for each row: it must keep meaning that row.
    let mut told_refs: HashMap<String, String> = HashMap::new();
    let mut row = None;
    for _ in 0..100 {
        let scrolled = act(s, json!({ "action": "scroll" })).await;
        // Reused nodes showing other rows came into view: they are not "changes".
        assert!(scrolled["changed"].is_null(), "{scrolled:#}");
        let lines = told(&scrolled);
        assert!(
            !lines.is_empty(),
            "a scroll brings rows into view: {scrolled:#}"
        );
        let list = ok(
            "browser_read",
            json!({ "session": s, "mode": "elements", "max_tokens": 100000 }),
        )
        .await;
        let (said, whole) = (scrolled.to_string().len(), list.to_string().len());
        assert!(said <= whole, "{said} > {whole}: {scrolled:#}");
        let listed = content_lines(&list);
        let in_view: Vec<&String> = listed
            .iter()
            .take_while(|line| line.as_str() != OFFSCREEN_HEADER)
            .collect();
        for line in &lines {
            assert!(in_view.contains(&line), "a told line is in view: {line}");
        }
        for line in &in_view {
            let (id, row) = line.split_once(' ').expect("a ref and the rest");
            if let Some(was) = told_refs.insert(row.to_string(), id.to_string()) {
                assert_eq!(was, id, "a row still in view keeps its ref: {line}");
            }
        }
        // The list's window is 672 px tall, its rows 36: rows drawn above and below it (the
        // list's overscan) are off-screen, whatever the viewport would show.
        assert!(in_view.len() <= 20, "{in_view:#?}");
        if let Some(line) = lines.iter().find(|l| l.contains("\"Order 734\"")) {
            row = Some(ref_of(std::slice::from_ref(line), "Order 734"));
            break;
        }
    }
    let row = row.expect("row 734 came into view");
    // Row 1 is long gone and its node shows another row: its ref acts on nothing.
    let stale = common::fails(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": order_1 }),
        "STALE_REF",
    )
    .await;
    assert!(seen.paths.lock().unwrap().is_empty(), "{stale:#}");
    let opened = act(s, json!({ "action": "click", "ref": row })).await;
    assert_eq!(opened["title"], "Order 734", "{opened:#}");
    assert_eq!(*seen.paths.lock().unwrap(), ["/orders/734"]);
}

/// A site of its own, its page at `path` opened in session `s`; what the site saw, and the
/// other site's origin.
async fn site_opened_at(s: &str, path: &str) -> (Seen, String) {
    let seen = Seen::default();
    let (origin, cross) = site(seen.clone()).await;
    ok(
        "browser_navigate",
        json!({ "session": s, "target": format!("{origin}{path}") }),
    )
    .await;
    (seen, cross)
}

/// Clicks `control`, which navigates a frame to `path` (on the `across` site when given): the
/// top page stays, and the result says which frame navigated.
async fn click_into_frame(s: &str, control: &str, path: &str, across: Option<&str>) {
    let target = ref_of(&element_lines(s).await, control);
    let done = act(s, json!({ "action": "click", "ref": target })).await;
    assert!(done["navigated"].is_null(), "the top page stays: {done:#}");
    let frame = done["frame_navigated"].as_str().unwrap_or_default();
    assert!(
        frame.contains(path),
        "{control}: says which frame navigated: {done:#}"
    );
    if let Some(site) = across {
        assert!(frame.starts_with(site), "{done:#}");
    }
}

/// The read right after shows the frame's new document.
async fn read_shows(s: &str, expected: &str) {
    let text = page_text(s).await;
    assert!(
        text.contains(expected),
        "{expected}: the read shows the frame's new document: {text}"
    );
}

#[tokio::test]
async fn a_frames_form_is_answered_once_its_answer_has_loaded_fifty_times_in_a_row() {
    let s = "frame-forms";
    let (seen, cross) = site_opened_at(s, "/host").await;
    for n in 1..=50 {
        for who in ["here", "across"] {
            let across = (who == "across").then_some(cross.as_str());
            let control = format!("Send {who}");
            let path = format!("/answer?who={who}");
            click_into_frame(s, &control, &path, across).await;
            read_shows(s, &format!("Answer {n} from {who}")).await;
        }
    }
    let answers = seen.answers.lock().unwrap().clone();
    assert_eq!(
        answers,
        HashMap::from([("here".into(), 50), ("across".into(), 50)])
    );
}

#[tokio::test]
async fn a_frame_navigated_by_a_link_target_or_a_script_is_answered_once_it_has_loaded() {
    let s = "frame-targets";
    let (seen, cross) = site_opened_at(s, "/panes").await;
    for n in 1..=10 {
        for (control, who) in [
            ("Open in pane", "link"),
            ("Open nested", "nested"),
            ("Move pane", "script"),
            ("Post nested", "posted"),
        ] {
            let (path, shown) = match who {
                "posted" => ("answer", format!("Answer {n} from {who}")),
                _ => ("slow", format!("Slow {n} for {who}")),
            };
            let across = matches!(who, "nested" | "posted").then_some(cross.as_str());
            click_into_frame(s, control, &format!("/{path}?who={who}"), across).await;
            read_shows(s, &shown).await;
        }
    }
    let answers = seen.answers.lock().unwrap().clone();
    assert_eq!(
        answers,
        HashMap::from([
            ("link".into(), 10),
            ("nested".into(), 10),
            ("script".into(), 10),
            ("posted".into(), 10)
        ])
    );
}
