//! The stores behind one trait, two engines: the same test bodies on the embedded SQLite and
//! files, and on a real PostgreSQL (a machine without it fails these tests, naming what to
//! install).

mod common;

use base64::Engine;
use common::postgres;
use serde_json::json;
use webpilot::agent::conversations::{Conversations, NewConversation, Record};
use webpilot::db::Storage;
use webpilot::db::postgres::Database;
use webpilot::error::ErrorCode;
use webpilot::ids::TenantName;
use webpilot::profiles::{self, OriginStorage, Profile, ProfileStore, SavedCookie};

async fn database() -> Database {
    let url = postgres::database();
    let database = Database::connect(&url).await.expect("the test PostgreSQL");
    profiles::migrate(&database).await.unwrap();
    database
}

async fn conversations_on(database: Option<&Database>) -> (Conversations, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(database, dir.path()).unwrap();
    let store = Conversations::open(&storage, dir.path()).await.unwrap();
    (store, dir)
}

#[tokio::test]
async fn conversations_on_sqlite() {
    conversations(conversations_on(None).await.0).await;
}

#[tokio::test]
async fn conversations_on_postgresql() {
    let database = database().await;
    conversations(conversations_on(Some(&database)).await.0).await;
}

/// Turns stored whole, images to files and back, titles from the first question, tenants apart,
/// paging newest first, deletion with the files.
async fn conversations(store: Conversations) {
    let first = store
        .create(&TenantName::Operator, NewConversation::default())
        .await
        .unwrap();
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
    let screenshot = webpilot::tools::Image {
        mime: "image/png",
        data: b"\x89PNG shot".to_vec(),
    };
    store
        .append(
            &first.id,
            vec![
                Record::of(json!({"role": "user", "content": "What is on the page?"})),
                Record::of(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]})),
                Record {
                    message: json!({"role": "tool", "tool_call_id": "1", "content": "a screenshot"}),
                    summary: Some("screenshot of the page".into()),
                    images: vec![screenshot],
                },
            ],
        )
        .await
        .unwrap();
    store
        .append(
            &first.id,
            vec![Record::of(json!({"role": "user", "content": "And now?"}))],
        )
        .await
        .unwrap();
    let stored = store.messages(&first.id).await.unwrap();
    let seqs: Vec<i64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(
        stored[1].message["content"][0]["image_url"]["url"],
        "file:2-0.png"
    );
    assert_eq!(stored[2].files, ["3-result-0.png"]);
    assert_eq!(stored[2].summary.as_deref(), Some("screenshot of the page"));
    let history = store.history(&first.id).await.unwrap();
    assert_eq!(
        history[1]["content"][0]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
    let conversation = store.get(&TenantName::Operator, &first.id).await.unwrap();
    assert_eq!(
        conversation.title, "What is on the page?",
        "the first question"
    );
    assert!(conversation.updated_ms >= conversation.created_ms);
    assert_eq!(
        store
            .file(&TenantName::Operator, &first.id, "2-0.png")
            .await
            .unwrap(),
        (b"\x89PNG fake".to_vec(), "image/png")
    );
    assert_eq!(
        store
            .file(&TenantName::Operator, &first.id, "3-result-0.png")
            .await
            .unwrap()
            .0,
        b"\x89PNG shot"
    );
    for bad in ["../db", "9-0.png", ""] {
        let error = store
            .file(&TenantName::Operator, &first.id, bad)
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::NoSuchConversation, "{bad:?}");
    }
    let error = store
        .get(&TenantName::keyed("other"), &first.id)
        .await
        .unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::NoSuchConversation,
        "another tenant's"
    );
    assert!(
        store
            .file(&TenantName::keyed("other"), &first.id, "2-0.png")
            .await
            .is_err()
    );

    let titled = store
        .create(
            &TenantName::Operator,
            NewConversation {
                title: Some("Kept".into()),
                tools: Some(vec!["browser_read".into()]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    store
        .append(
            &titled.id,
            vec![Record::of(json!({"role": "user", "content": "q"}))],
        )
        .await
        .unwrap();
    let titled = store.get(&TenantName::Operator, &titled.id).await.unwrap();
    assert_eq!(titled.title, "Kept");
    assert_eq!(titled.tools, Some(vec!["browser_read".to_string()]));
    for _ in 0..3 {
        store
            .create(&TenantName::Operator, NewConversation::default())
            .await
            .unwrap();
    }
    store
        .create(&TenantName::keyed("other"), NewConversation::default())
        .await
        .unwrap();
    let (page, next) = store.list(&TenantName::Operator, 2, None).await.unwrap();
    assert_eq!(page.len(), 2);
    let (rest, last) = store
        .list(&TenantName::Operator, 10, next.as_deref())
        .await
        .unwrap();
    assert_eq!(rest.len(), 3, "five of this tenant's, none of the other's");
    assert!(last.is_none());
    assert_eq!(rest.last().unwrap().id, first.id, "oldest last");
    assert!(rest.iter().all(|c| !page.iter().any(|p| p.id == c.id)));
    let error = store
        .list(&TenantName::Operator, 2, Some("x1"))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgument);

    assert!(
        !store
            .delete(&TenantName::keyed("other"), &first.id)
            .await
            .unwrap()
    );
    assert!(
        store
            .delete(&TenantName::Operator, &first.id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete(&TenantName::Operator, &first.id)
            .await
            .unwrap()
    );
    assert!(store.messages(&first.id).await.unwrap().is_empty());
    assert!(
        store
            .file(&TenantName::Operator, &first.id, "2-0.png")
            .await
            .is_err()
    );
    let error = store
        .append(
            &first.id,
            vec![Record::of(json!({"role": "user", "content": "late"}))],
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::NoSuchConversation,
        "deleted mid-answer"
    );
    assert!(store.messages(&first.id).await.unwrap().is_empty());
}

fn profile(name: &str, value: &str) -> Profile {
    Profile {
        name: name.into(),
        account: Some("alice".into()),
        saved_at: 1,
        start_url: Some("http://127.0.0.1:1/account".into()),
        cookies: vec![SavedCookie {
            name: "session".into(),
            value: value.into(),
            domain: "127.0.0.1".into(),
            path: "/".into(),
            expires: None,
            http_only: true,
            secure: false,
            same_site: Some("Lax".into()),
        }],
        origins: vec![OriginStorage {
            origin: "http://127.0.0.1:1".into(),
            local_storage: vec![("token".into(), "t".into())],
        }],
    }
}

fn key(byte: &str) -> chacha20poly1305::Key {
    profiles::parse_key(&byte.repeat(32)).unwrap()
}

#[tokio::test]
async fn profiles_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = |key| ProfileStore::new(dir.path(), key);
    let saved = profiles(store).await;
    let raw = std::fs::read(&saved).unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("the secret value"));
    let mode = std::fs::metadata(&saved).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

#[tokio::test]
async fn profiles_on_postgresql() {
    let database = database().await;
    let store = |key| ProfileStore::in_database(database.clone(), "acme", key);
    assert_eq!(profiles(store).await, "postgresql:profiles/sealed");
    let rows = database
        .client()
        .await
        .unwrap()
        .query(
            "SELECT tenant, body FROM profiles WHERE name = 'sealed'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, &str>(0), "acme");
    let body: Vec<u8> = rows[0].get(1);
    assert!(!String::from_utf8_lossy(&body).contains("the secret value"));
    let elsewhere = ProfileStore::in_database(database.clone(), "other", None);
    assert!(elsewhere.names().await.unwrap().is_empty(), "tenants apart");
}

/// Round trips plain and sealed, replaces whole, names sorted, a sealed profile refused without
/// its key; returns where the sealed one went.
async fn profiles(store: impl Fn(Option<chacha20poly1305::Key>) -> ProfileStore) -> String {
    let plain = store(None);
    let error = plain.load("missing").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NoSuchProfile);
    plain.save(&profile("site", "v1")).await.unwrap();
    plain.save(&profile("site", "v2")).await.unwrap();
    assert_eq!(plain.load("site").await.unwrap(), profile("site", "v2"));
    assert!(plain.save(&profile("../x", "v")).await.is_err());

    let sealed = store(Some(key("ab")));
    let saved = sealed
        .save(&profile("sealed", "the secret value"))
        .await
        .unwrap();
    assert_eq!(
        sealed.load("sealed").await.unwrap(),
        profile("sealed", "the secret value")
    );
    assert_eq!(sealed.names().await.unwrap(), ["sealed", "site"]);
    for other in [store(Some(key("cd"))), store(None)] {
        let error = other.load("sealed").await.unwrap_err();
        assert_eq!(error.code, ErrorCode::NotConfigured);
    }
    let error = plain.load("nothing").await.unwrap_err();
    assert!(error.hint.contains("sealed, site"), "{}", error.hint);
    saved
}

/// TLS as libpq's `sslmode` says, against a server with a CA of its own; the evidence is the
/// server's `pg_stat_ssl` row for the connection.
#[tokio::test]
async fn postgresql_connections_use_tls_as_sslmode_says() {
    let (url, ca) = (postgres::database(), postgres::ca_file());
    let ssl_of = |url: String| async move {
        let database = Database::connect(&url).await?;
        let row = database
            .client()
            .await?
            .query_opt(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await?;
        anyhow::Ok(row.map(|row| row.get::<_, bool>(0)))
    };
    let with = |options: String| format!("{url}?{options}");
    let verified = with(format!("sslmode=verify-full&sslrootcert={}", ca.display()));
    for (url, tls) in [
        (url.clone(), true),
        (with("sslmode=disable".into()), false),
        (with("sslmode=require".into()), true),
        (verified.clone(), true),
        (verified.replace("127.0.0.1", "localhost"), true),
    ] {
        assert_eq!(ssl_of(url.clone()).await.unwrap(), Some(tls), "{url}");
    }
    let unknown = ssl_of(with("sslmode=verify-full".into()))
        .await
        .unwrap_err();
    assert!(
        format!("{unknown:#}").contains("certificate"),
        "the public roots do not vouch for the test CA: {unknown:#}"
    );
    let missing = with("sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem".into());
    let missing = ssl_of(missing).await.unwrap_err();
    assert!(
        format!("{missing:#}").contains("sslrootcert"),
        "{missing:#}"
    );
}
