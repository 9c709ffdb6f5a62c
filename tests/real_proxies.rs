//! The upstream proxies users run, as Debian ships them: squid with its default configuration
//! plus Basic credentials (`basic_ncsa_auth`), and dante (SOCKS5 with a user name and
//! password). Each is started here on loopback; the sites behind them answer only connections
//! from the proxy's outgoing address (127.0.0.9), so a page that loads came through the proxy.
//! Squid's defaults allow `CONNECT` to port 443 only, which is where the HTTPS site listens.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{Harness, call_at, ok_at};
use serde_json::json;

/// The address the proxies connect out from; the sites refuse every other peer.
const PROXY_OUT: &str = "127.0.0.9";
/// Where the HTTPS site listens (port 443, the one port squid tunnels to by default).
const HTTPS_IP: &str = "127.0.0.10";
/// Names only the proxy resolves (squid's hosts file).
const HTTP_NAME: &str = "shop.proxied.test";
const HTTPS_NAME: &str = "secure.proxied.test";
const USER: &str = "agent";
const MARKER: &str = "Reached through the proxy";

/// Peers the sites saw, and which of them were served.
type Seen = Arc<Mutex<Vec<(IpAddr, String)>>>;

struct Sites {
    http_port: u16,
    seen: Seen,
    ca_file: PathBuf,
    spki: String,
    dir: tempfile::TempDir,
}

/// Whatever this binary started; killed when it exits.
static CHILDREN: Mutex<Vec<Child>> = Mutex::new(Vec::new());

extern "C" fn kill_children() {
    if let Ok(mut children) = CHILDREN.lock() {
        for child in children.iter_mut() {
            let _ = child.kill();
        }
    }
}

fn adopt(child: Child) {
    let mut children = CHILDREN.lock().unwrap();
    if children.is_empty() {
        unsafe { libc::atexit(kill_children) };
    }
    children.push(child);
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn sites() -> &'static Sites {
    static SITES: OnceLock<Sites> = OnceLock::new();
    SITES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let seen = Seen::default();
        let (server_config, spki) = certificates(dir.path());
        let http = TcpListener::bind("127.0.0.1:0").unwrap();
        let http_port = http.local_addr().unwrap().port();
        spawn_site(http, None, seen.clone());
        let https = TcpListener::bind((HTTPS_IP, 443)).expect("port 443 (the tests run as root)");
        spawn_site(https, Some(server_config), seen.clone());
        Sites {
            http_port,
            seen,
            ca_file: dir.path().join("ca.pem"),
            spki,
            dir,
        }
    })
}

/// A CA (`ca.pem`) and the HTTPS site's certificate signed by it; the site's TLS settings and
/// the SHA-256 of its public key, which the test's Chromium is told to trust.
fn certificates(dir: &Path) -> (Arc<rustls::ServerConfig>, String) {
    use base64::Engine;
    use rcgen::PublicKeyData;
    use sha2::Digest;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![HTTPS_NAME.into(), HTTPS_IP.into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let spki = base64::engine::general_purpose::STANDARD
        .encode(sha2::Sha256::digest(key.subject_public_key_info()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (Arc::new(config), spki)
}

/// A site on its own threads: one small page to peers from `PROXY_OUT`, 403 to anyone else.
fn spawn_site(listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>, seen: Seen) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (tls, seen) = (tls.clone(), seen.clone());
            std::thread::spawn(move || {
                let peer = stream.peer_addr().unwrap().ip();
                match tls {
                    Some(config) => {
                        let Ok(connection) = rustls::ServerConnection::new(config) else {
                            return;
                        };
                        answer(rustls::StreamOwned::new(connection, stream), peer, &seen);
                    }
                    None => answer(stream, peer, &seen),
                }
            });
        }
    });
}

fn answer(stream: impl std::io::Read + Write, peer: IpAddr, seen: &Seen) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    seen.lock().unwrap().push((peer, path.clone()));
    let (status, body) = if peer.to_string() != PROXY_OUT {
        (
            "403 Forbidden",
            "direct connections are refused".to_string(),
        )
    } else if path == "/shop.html" {
        (
            "200 OK",
            format!("<!doctype html><title>Proxied shop</title><h1>Shop</h1><p>{MARKER}.</p>"),
        )
    } else {
        ("404 Not Found", "no such page".to_string())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let stream = reader.get_mut();
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
}

/// A Chromium that trusts the HTTPS site's key, as a browser with the company CA installed
/// would.
fn trusting_chromium(dir: &Path, spki: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("chromium");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec /usr/bin/chromium --ignore-certificate-errors-spki-list={spki} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `port` (the proxy finished starting).
fn wait_for_port(port: u16, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not start: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A directory the proxies' unprivileged users can read and write.
fn shared_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = sites().dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(sites().dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

struct Squid {
    port: u16,
    password: String,
    access_log: PathBuf,
}

/// Squid with Debian's default squid.conf, plus Basic credentials checked by
/// `basic_ncsa_auth`, its own port, logs and hosts file, and `tcp_outgoing_address`.
fn squid() -> &'static Squid {
    static SQUID: OnceLock<Squid> = OnceLock::new();
    SQUID.get_or_init(|| {
        let dir = shared_dir("squid");
        let password = random_password();
        let hash = Command::new("openssl")
            .args(["passwd", "-apr1", &password])
            .output()
            .expect("openssl");
        let hash = String::from_utf8(hash.stdout).unwrap();
        std::fs::write(dir.join("passwd"), format!("{USER}:{}\n", hash.trim())).unwrap();
        std::fs::write(
            dir.join("hosts"),
            format!("127.0.0.1 {HTTP_NAME}\n{HTTPS_IP} {HTTPS_NAME}\n"),
        )
        .unwrap();
        let port = free_port();
        let defaults = std::fs::read_to_string("/etc/squid/squid.conf")
            .expect("squid (scripts/setup installs Debian's squid)");
        let config = squid_config(&defaults, &dir, port);
        std::fs::write(dir.join("squid.conf"), config).unwrap();
        for log in ["access.log", "cache.log"] {
            std::fs::write(dir.join(log), "").unwrap();
            std::fs::set_permissions(
                dir.join(log),
                std::os::unix::fs::PermissionsExt::from_mode(0o666),
            )
            .unwrap();
        }
        let child = Command::new("/usr/sbin/squid")
            .args(["-N", "-f"])
            .arg(dir.join("squid.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("squid");
        adopt(child);
        wait_for_port(port, "squid", &dir.join("cache.log"));
        Squid {
            port,
            password,
            access_log: dir.join("access.log"),
        }
    })
}

/// Debian's default configuration with our port, credentials and files; its access rules
/// (`deny CONNECT !SSL_ports` among them) are kept as they are.
fn squid_config(defaults: &str, dir: &Path, port: u16) -> String {
    let d = dir.display();
    let auth = format!(
        "auth_param basic program /usr/lib/squid/basic_ncsa_auth {d}/passwd\n\
         auth_param basic realm webpilot-test\n\
         acl authenticated proxy_auth REQUIRED\n\
         http_access deny !authenticated\n"
    );
    let mut config = String::new();
    let mut auth_added = false;
    for line in defaults.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("http_port ") {
            config.push_str(&format!("http_port 127.0.0.1:{port}\n"));
            continue;
        }
        if trimmed.starts_with("include ") || trimmed.starts_with("coredump_dir ") {
            continue;
        }
        if !auth_added && trimmed.starts_with("http_access allow localhost") {
            config.push_str(&auth);
            auth_added = true;
        }
        config.push_str(line);
        config.push('\n');
    }
    assert!(auth_added, "Debian's squid.conf changed shape:\n{defaults}");
    config.push_str(&format!(
        "pid_filename none\naccess_log stdio:{d}/access.log squid\ncache_log {d}/cache.log\n\
         cache_store_log none\ncoredump_dir {d}\nhosts_file {d}/hosts\n\
         tcp_outgoing_address {PROXY_OUT}\ncache deny all\nshutdown_lifetime 0 seconds\n"
    ));
    config
}

struct Dante {
    port: u16,
    user: String,
    password: String,
}

/// Dante's SOCKS5 server with the `username` method (the system's password database), for a
/// system user the test gives a fresh random password each run.
fn dante() -> &'static Dante {
    static DANTE: OnceLock<Dante> = OnceLock::new();
    DANTE.get_or_init(|| {
        let dir = shared_dir("dante");
        let user = "webpilot-socks-test".to_string();
        let password = random_password();
        let exists = Command::new("id")
            .arg(&user)
            .output()
            .unwrap()
            .status
            .success();
        if !exists {
            let made = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(&user)
                .status()
                .unwrap();
            assert!(made.success(), "useradd {user}");
        }
        let mut chpasswd = Command::new("chpasswd")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        chpasswd
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{user}:{password}\n").as_bytes())
            .unwrap();
        assert!(chpasswd.wait().unwrap().success(), "chpasswd");
        let port = free_port();
        let log = dir.join("danted.log");
        let config = format!(
            "logoutput: {log}\ninternal: 127.0.0.1 port = {port}\nexternal: {PROXY_OUT}\n\
             socksmethod: username\nuser.privileged: root\nuser.unprivileged: nobody\n\
             client pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 }}\n\
             socks pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 command: connect }}\n",
            log = log.display()
        );
        std::fs::write(dir.join("danted.conf"), config).unwrap();
        let child = Command::new("/usr/sbin/danted")
            .arg("-f")
            .arg(dir.join("danted.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("danted (scripts/setup installs Debian's dante-server)");
        adopt(child);
        wait_for_port(port, "dante", &log);
        Dante {
            port,
            user,
            password,
        }
    })
}

fn random_password() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A service whose proxy is `proxy`, trusting the HTTPS site's CA (fetches) and key (browser).
fn service(proxy: String) -> Harness {
    let sites = sites();
    let mut config = common::loopback_config();
    config.proxy = Some(proxy);
    config.fetch.allow.push(HTTPS_IP.into());
    config.fetch.ca_file = Some(sites.ca_file.clone());
    config.chromium = trusting_chromium(sites.dir.path(), &sites.spki);
    common::start(config)
}

fn squid_service() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let squid = squid();
        service(format!(
            "http://{USER}:{}@127.0.0.1:{}",
            squid.password, squid.port
        ))
    })
}

fn dante_service() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dante = dante();
        service(format!(
            "socks5://{}:{}@127.0.0.1:{}",
            dante.user, dante.password, dante.port
        ))
    })
}

/// Opens `http_url` and `https_url` in a browser session and with open_web_page; each must
/// show the site's page, served to the proxy.
fn reads_both_sites(h: &Harness, session: &str, http_url: String, https_url: String) {
    let api = h.api.clone();
    let session = session.to_string();
    let (urls, results) = (
        vec![http_url.clone(), https_url.clone()],
        h.block_on(async move {
            let mut results = Vec::new();
            for url in [http_url, https_url] {
                let opened = call_at(
                    &api,
                    "browser_navigate",
                    json!({ "session": session, "target": url }),
                )
                .await;
                let read = call_at(
                    &api,
                    "browser_read",
                    json!({ "session": session, "mode": "text" }),
                )
                .await;
                let fetched =
                    call_at(&api, "open_web_page", json!({ "url": url, "mode": "http" })).await;
                results.push((opened, read, fetched));
            }
            results
        }),
    );
    for (url, (opened, read, fetched)) in urls.iter().zip(results) {
        assert_eq!(opened.0, 200, "browser_navigate {url}: {opened:?}");
        assert_eq!(
            opened.1["status"], 200,
            "browser_navigate {url}: {opened:?}"
        );
        assert!(
            read.1.to_string().contains(MARKER),
            "browser_read {url}: {read:?}"
        );
        assert_eq!(fetched.0, 200, "open_web_page {url}: {fetched:?}");
        assert!(
            fetched.1.to_string().contains(MARKER),
            "open_web_page {url}: {fetched:?}"
        );
    }
}

fn served_paths(peer: &str) -> usize {
    sites()
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(ip, path)| ip.to_string() == peer && path == "/shop.html")
        .count()
}

#[test]
fn squid_with_its_defaults_carries_plain_http_and_https() {
    if !is_root() {
        eprintln!("the real-proxy tests start squid and bind port 443: run them as root");
        return;
    }
    let h = squid_service();
    let port = sites().http_port;
    reads_both_sites(
        h,
        "via-squid",
        format!("http://{HTTP_NAME}:{port}/shop.html"),
        format!("https://{HTTPS_NAME}/shop.html"),
    );
    assert!(served_paths(PROXY_OUT) >= 4, "{:?}", sites().seen);
    let log = std::fs::read_to_string(&squid().access_log).unwrap();
    // Plain HTTP went as absolute-form requests (squid refuses CONNECT to ports but 443), the
    // HTTPS site through a tunnel; each with the credentials.
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!(" GET http://{HTTP_NAME}:{port}/shop.html {USER} "))),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!(" CONNECT {HTTPS_NAME}:443 {USER} "))),
        "{log}"
    );
    assert!(
        !log.contains("TCP_DENIED/403"),
        "squid refused something: {log}"
    );
}

#[test]
fn a_wrong_password_is_refused_by_squid_and_shown_nowhere() {
    if !is_root() {
        return;
    }
    let h = squid_service();
    let wrong = format!("http://{USER}:not-the-password@127.0.0.1:{}", squid().port);
    let api = h.api.clone();
    let url = format!("http://{HTTP_NAME}:{}/shop.html", sites().http_port);
    let secure = format!("https://{HTTPS_NAME}/shop.html");
    let (opened, plain, tls) = h.block_on(async move {
        let opened = ok_at(&api, "browser_tabs", json!({ "session": "wrong-pw", "action": "new", "session_options": { "proxy": wrong } })).await;
        let plain = call_at(&api, "browser_navigate", json!({ "session": "wrong-pw", "target": url })).await;
        let tls = call_at(&api, "browser_navigate", json!({ "session": "wrong-pw", "target": secure })).await;
        (opened, plain, tls)
    });
    for refused in [&plain, &tls] {
        assert_ne!(refused.0, 200, "{refused:?}");
        let message = refused.1["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("407") || message.contains("credentials"),
            "{refused:?}"
        );
        assert!(!refused.1.to_string().contains("not-the-password"));
    }
    assert!(!opened.to_string().contains("not-the-password"));
    let log = std::fs::read_to_string(&squid().access_log).unwrap();
    assert!(log.contains("TCP_DENIED/407"), "{log}");
}

#[test]
fn dante_carries_plain_http_and_https_with_credentials() {
    if !is_root() {
        eprintln!("the real-proxy tests start dante with a system user: run them as root");
        return;
    }
    let h = dante_service();
    let before = served_paths(PROXY_OUT);
    reads_both_sites(
        h,
        "via-dante",
        format!("http://127.0.0.1:{}/shop.html", sites().http_port),
        format!("https://{HTTPS_IP}/shop.html"),
    );
    assert!(served_paths(PROXY_OUT) >= before + 4, "{:?}", sites().seen);
    // A wrong password: dante refuses, the message says so without it.
    let wrong = format!(
        "socks5://{}:not-the-password@127.0.0.1:{}",
        dante().user,
        dante().port
    );
    let api = h.api.clone();
    let url = format!("http://127.0.0.1:{}/shop.html", sites().http_port);
    let refused = h.block_on(async move {
        ok_at(&api, "browser_tabs", json!({ "session": "dante-wrong", "action": "new", "session_options": { "proxy": wrong } })).await;
        call_at(&api, "browser_navigate", json!({ "session": "dante-wrong", "target": url })).await
    });
    assert_ne!(refused.0, 200, "{refused:?}");
    let message = refused.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("credentials"), "{refused:?}");
    assert!(!refused.1.to_string().contains("not-the-password"));
}
