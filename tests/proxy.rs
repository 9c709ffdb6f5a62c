//! An upstream proxy (`--proxy`): the browser and the HTTP client both go through it with
//! credentials, bypassed hosts go direct, the URL policy still refuses private targets before
//! the proxy sees them, a name this machine cannot resolve is left to the proxy, and a session
//! may bring its own proxy. The proxy is a small forwarding proxy written here, which records
//! exactly what it was asked (the real proxies users run are in tests/real_proxies.rs).

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use common::{Harness, call_at, ok_at};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy was asked: method, target, and the credentials it was shown.
type Asked = Arc<Mutex<Vec<(String, String, String)>>>;

const USER: &str = "agent";
const PASSWORD: &str = "s3cret-pw";

struct Setup {
    harness: Harness,
    proxy: String,
    asked: Asked,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let asked = Asked::default();
        let port = start_proxy(asked.clone());
        let proxy = format!("127.0.0.1:{port}");
        let mut config = common::loopback_config();
        config.proxy = Some(format!("http://{USER}:{PASSWORD}@{proxy}"));
        // The cross-site fixture (`localhost`) goes direct.
        config.proxy_bypass = vec!["localhost".into()];
        Setup {
            harness: common::start(config),
            proxy,
            asked,
        }
    })
}

/// A forwarding proxy on its own thread: `CONNECT` tunnels and absolute-form requests, Basic
/// credentials required.
fn start_proxy(asked: Asked) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            loop {
                let (client, _) = listener.accept().await.unwrap();
                tokio::spawn(forward(client, asked.clone()));
            }
        });
    });
    rx.recv().unwrap()
}

async fn forward(mut client: TcpStream, asked: Asked) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match client.read_u8().await {
            Ok(byte) => head.push(byte),
            Err(_) => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut words = text.split_whitespace();
    let (method, target) = (
        words.next().unwrap_or_default().to_string(),
        words.next().unwrap_or_default().to_string(),
    );
    let auth = text
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("proxy-authorization")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    asked
        .lock()
        .unwrap()
        .push((method.clone(), target.clone(), auth.clone()));
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    );
    if auth != expected {
        let _ = client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    }
    let authority = if method == "CONNECT" {
        target.clone()
    } else {
        let url = url::Url::parse(&target).unwrap();
        format!(
            "{}:{}",
            url.host_str().unwrap(),
            url.port_or_known_default().unwrap()
        )
    };
    let Ok(mut server) = TcpStream::connect(authority.as_str()).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    if method == "CONNECT" {
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    } else if server.write_all(&head).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

fn asked_for(needle: &str) -> Vec<(String, String, String)> {
    setup()
        .asked
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, target, _)| target.contains(needle))
        .cloned()
        .collect()
}

fn authority(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

#[test]
fn the_browser_and_the_http_client_go_through_the_proxy() {
    let s = setup();
    let h = &s.harness;
    let (api, page) = (h.api.clone(), h.page("article.html"));
    let (opened, read) = h.block_on(async move {
        let opened = ok_at(
            &api,
            "browser_navigate",
            json!({ "session": "proxied", "target": page }),
        )
        .await;
        let read = ok_at(
            &api,
            "open_web_page",
            json!({ "url": page, "mode": "http" }),
        )
        .await;
        (opened, read)
    });
    assert_eq!(opened["status"], 200, "{opened:#}");
    assert!(!read["content"].as_str().unwrap().is_empty(), "{read:#}");
    let fixtures = authority(&h.fixtures);
    let seen = asked_for(&fixtures);
    let credentials = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    );
    // Plain HTTP goes to an HTTP proxy in absolute form, from the browser and the HTTP client
    // alike (proxies commonly allow CONNECT to port 443 only).
    let requests = seen
        .iter()
        .filter(|(method, target, auth)| {
            method == "GET"
                && *target == format!("http://{fixtures}/article.html")
                && *auth == credentials
        })
        .count();
    assert!(
        requests >= 2,
        "the browser's and the HTTP client's requests: {seen:?}"
    );
    assert!(
        !seen.iter().any(|(method, _, _)| method == "CONNECT"),
        "plain HTTP was tunnelled: {seen:?}"
    );
}

#[test]
fn private_targets_stay_refused_and_bypassed_hosts_go_direct() {
    let s = setup();
    let h = &s.harness;
    let (api, cross_site) = (h.api.clone(), format!("{}/article.html", h.cross_site));
    let (browser, http, direct) = h.block_on(async move {
        let browser = call_at(
            &api,
            "browser_navigate",
            json!({ "session": "refused", "target": "http://127.0.0.3:9/x" }),
        )
        .await;
        let http = call_at(
            &api,
            "open_web_page",
            json!({ "url": "http://127.0.0.3:9/x", "mode": "http" }),
        )
        .await;
        let direct = ok_at(
            &api,
            "browser_navigate",
            json!({ "session": "direct", "target": cross_site }),
        )
        .await;
        (browser, http, direct)
    });
    assert_eq!(browser.1["error"]["code"], "BLOCKED_URL", "{browser:?}");
    assert_eq!(http.1["error"]["code"], "BLOCKED_URL", "{http:?}");
    assert!(
        asked_for("127.0.0.3").is_empty(),
        "the proxy saw a refused target"
    );
    assert_eq!(direct["status"], 200, "{direct:#}");
    assert!(
        asked_for("localhost").is_empty(),
        "a bypassed host went through the proxy"
    );
}

#[test]
fn names_only_the_proxy_knows_go_to_it_and_sessions_bring_their_own() {
    let s = setup();
    let h = &s.harness;
    let api = h.api.clone();
    let wrong = format!("http://{USER}:not-the-password@{}", s.proxy);
    let page = h.page("article.html");
    let (unknown, refused, listed) = h.block_on(async move {
        let unknown = call_at(&api, "browser_navigate", json!({ "session": "intranet", "target": "http://wiki.corp.invalid:8080/" })).await;
        let opened = ok_at(&api, "browser_tabs", json!({ "session": "own-proxy", "action": "new", "session_options": { "proxy": wrong } })).await;
        let refused = call_at(&api, "browser_navigate", json!({ "session": "own-proxy", "target": page })).await;
        (unknown, refused, opened)
    });
    // The proxy was asked for the name (and could not reach it either).
    assert!(
        !asked_for("wiki.corp.invalid:8080").is_empty(),
        "{unknown:?}"
    );
    // The proxy could not reach it either: a failed navigation, or the proxy's own 502 page.
    assert!(
        unknown.0 != 200 || unknown.1["status"] == 502,
        "{unknown:?}"
    );
    // The session's own proxy, with its wrong password: refused by the proxy, said plainly,
    // and the password is shown nowhere.
    let message = refused.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("407") || message.contains("credentials"),
        "{refused:?}"
    );
    assert!(!refused.1.to_string().contains("not-the-password"));
    assert_eq!(
        listed["identity"]["proxy"],
        format!("http://{}", s.proxy),
        "{listed:#}"
    );
    assert!(!listed.to_string().contains("not-the-password"));
}
