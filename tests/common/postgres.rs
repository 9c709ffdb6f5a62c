//! A real PostgreSQL server for the tests that run against it: Debian's binaries
//! (`/usr/lib/postgresql/*/bin`, installed by scripts/setup), one server per test binary in a
//! temporary directory on a free port, a database per test. Started as the `postgres` user when
//! the tests run as root (PostgreSQL refuses root), and killed with the test binary. It offers
//! TLS with a certificate for 127.0.0.1 and localhost from a CA made for it ([`ca_file`]), as
//! managed PostgreSQL does: clients that do not ask for TLS (`sslmode=prefer`) get it anyway.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

/// A running server: its port and the user every test connects as.
pub struct Server {
    port: u16,
}

const USER: &str = "webpilot";

static SERVER: OnceLock<Server> = OnceLock::new();
static PID: AtomicU32 = AtomicU32::new(0);
static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The PEM file of the CA that signed the test server's certificate.
pub fn ca_file() -> PathBuf {
    server();
    DIR.get().expect("the server's directory").join("ca.pem")
}

/// Writes a CA (`ca.pem`) and a server certificate for 127.0.0.1 and localhost signed by it
/// (`server.crt`, `server.key`, the key readable by its owner only) into `dir`.
fn make_certificates(dir: &Path, user: Option<(libc::uid_t, libc::gid_t)>) {
    use std::os::unix::fs::PermissionsExt;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "webpilot test CA");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca_pem).unwrap();
    std::fs::write(dir.join("server.crt"), server.pem()).unwrap();
    let key_file = dir.join("server.key");
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    if let Some((uid, gid)) = user {
        for file in ["server.crt", "server.key"] {
            std::os::unix::fs::chown(dir.join(file), Some(uid), Some(gid)).unwrap();
        }
    }
}

/// The binary's server, started on first use. A machine without PostgreSQL fails the test
/// that needs it, naming what to install: a test that passed without running would say
/// nothing.
pub fn server() -> &'static Server {
    SERVER.get_or_init(|| match bin_dir() {
        Some(bin) => start(&bin),
        None => panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): \
             `scripts/setup --test` installs Debian's postgresql"
        ),
    })
}

/// A fresh, empty database on the binary's server, as a URL.
pub fn database() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let server = server();
    let name = format!("test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let admin = server.url("postgres");
    let statement = format!("CREATE DATABASE {name}");
    // Its own thread and runtime: callers may be inside a runtime already.
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                    .await
                    .expect("connect to the test PostgreSQL");
                tokio::spawn(connection);
                client.batch_execute(&statement).await.expect(&statement);
            })
    })
    .join()
    .unwrap();
    server.url(&name)
}

impl Server {
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{database}", self.port)
    }
}

/// The newest installed PostgreSQL's binaries.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// The `postgres` user's ids when running as root (the server will not run as root).
fn server_user() -> Option<(libc::uid_t, libc::gid_t)> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").unwrap();
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !entry.is_null(),
        "running as root without a `postgres` user to run PostgreSQL as"
    );
    Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// `command` run as `user` (when set), killed when the thread that started it ends.
fn as_server(command: &mut std::process::Command, user: Option<(libc::uid_t, libc::gid_t)>) {
    unsafe {
        command.pre_exec(move || {
            if let Some((uid, gid)) = user
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            // After setuid, which clears it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn start(bin: &Path) -> Server {
    let dir = tempfile::Builder::new()
        .prefix("webpilot-pg-")
        .tempdir()
        .expect("a temp dir")
        .keep();
    let user = server_user();
    if let Some((uid, gid)) = user {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::chown(path.as_ptr(), uid, gid) }, 0);
    }
    make_certificates(&dir, user);
    let data = dir.join("data");
    let mut initdb = std::process::Command::new(bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync"])
        .stdout(std::process::Stdio::null());
    as_server(&mut initdb, user);
    let output = initdb.output().expect("initdb runs");
    assert!(
        output.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut postgres = std::process::Command::new(bin.join("postgres"));
    postgres
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(&dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "max_connections=300",
            "-c",
            "ssl=on",
        ])
        .arg("-c")
        .arg(format!(
            "ssl_cert_file={}",
            dir.join("server.crt").display()
        ))
        .arg("-c")
        .arg(format!("ssl_key_file={}", dir.join("server.key").display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    as_server(&mut postgres, user);
    // A thread that lives as long as the binary: the server dies with it, not with a test.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut child = postgres.spawn().expect("postgres starts");
        sender.send(child.id()).unwrap();
        let _ = child.wait();
    });
    PID.store(receiver.recv().unwrap(), Ordering::Relaxed);
    DIR.set(dir).ok();
    unsafe { libc::atexit(stop_at_exit) };
    let server = Server { port };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "PostgreSQL did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Accepting connections is not yet accepting logins: wait for a query to work.
    let admin = server.url("postgres");
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                loop {
                    if let Ok((client, connection)) =
                        tokio_postgres::connect(&admin, tokio_postgres::NoTls).await
                    {
                        tokio::spawn(connection);
                        if client.batch_execute("SELECT 1").await.is_ok() {
                            return;
                        }
                    }
                    assert!(
                        std::time::Instant::now() < deadline,
                        "PostgreSQL did not start"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
    })
    .join()
    .unwrap();
    server
}

extern "C" fn stop_at_exit() {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    if let Some(dir) = DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
