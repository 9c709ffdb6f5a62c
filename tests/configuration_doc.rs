//! docs/configuration.md is what `webpilot config-reference` generates from the code, and the
//! generator leaves out no flag of the serve command and no setting of the file (each with a
//! description).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;
use webpilot::config::{Config, KeyEntry, reference};

fn committed() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn the_committed_reference_is_the_generated_one() {
    let (committed, generated) = (committed(), reference::markdown());
    if committed == generated {
        return;
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(old, new)| old != new)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    panic!(
        "docs/configuration.md is not what the code generates (first difference at line {}); \
         regenerate it in the repository's root with:\n\n    {}\n",
        line + 1,
        reference::REGENERATE
    );
}

/// The long flags of `webpilot serve --help` (every global flag) and their variables, read
/// from the binary rather than from the generator.
fn serve_flags() -> Vec<(String, Option<String>)> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8(output.stdout).unwrap();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    for line in help.lines() {
        // A flag's definition starts its line (`  -h, --help`, `      --bind <BIND>`); its
        // help may name other flags, further on.
        if line.trim_start().starts_with('-')
            && let Some(flag) = line.split_whitespace().find(|word| word.starts_with("--"))
        {
            flags.push((flag.trim_end_matches(',').to_string(), None));
        }
        if let (Some((_, env)), Some(last)) = (line.split_once("[env: "), flags.last_mut()) {
            last.1 = env.split(['=', ']']).next().map(str::to_string);
        }
    }
    flags.retain(|(flag, _)| flag != "--help" && flag != "--version");
    flags
}

#[test]
fn every_flag_of_the_serve_command_is_described() {
    let generated = reference::markdown();
    let flags = serve_flags();
    assert!(flags.len() > 30, "{flags:?}");
    for (flag, env) in flags {
        let row = generated
            .lines()
            .find(|line| line.starts_with(&format!("| `{flag} ")))
            .unwrap_or_else(|| panic!("{flag} is not in the reference"));
        let env = env.unwrap_or_else(|| panic!("{flag} has no environment variable"));
        assert!(row.contains(&format!("| `{env}` |")), "{flag}: {row}");
        let help = row.rsplit(" | ").next().unwrap().trim_end_matches(" |");
        assert!(help.len() > 10, "{flag} has no help: {row}");
    }
}

/// The rows of the section `header` (`### Top level`, ``### `[fetch]` ``) of the reference.
fn section<'a>(generated: &'a str, header: &str) -> &'a str {
    let start = generated
        .find(&format!("\n{header}\n"))
        .unwrap_or_else(|| panic!("no section {header}"));
    let rest = &generated[start + header.len() + 2..];
    &rest[..rest.find("\n#").unwrap_or(rest.len())]
}

fn assert_described(generated: &str, header: &str, keys: impl IntoIterator<Item = String>) {
    let rows = section(generated, header);
    for key in keys {
        let row = rows
            .lines()
            .find(|line| line.starts_with(&format!("| `{key}` |")))
            .unwrap_or_else(|| panic!("{key} is not in {header}"));
        let description = row.rsplit(" | ").next().unwrap().trim_end_matches(" |");
        assert!(description.len() > 10, "{key} has no description: {row}");
    }
}

/// The keys serde writes for `value`: the file's keys, independently of the schema.
fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn every_setting_of_the_file_is_described() {
    let generated = reference::markdown();
    let config = serde_json::to_value(Config::default()).unwrap();
    let mut top = Vec::new();
    for (key, value) in config.as_object().unwrap() {
        match (key.as_str(), value) {
            ("keys", _) => {
                // Every field set, so that none is skipped (a new field must be added here).
                let entry = KeyEntry {
                    tenant: "alice".into(),
                    sha256: "0".repeat(64),
                    max_sessions: Some(1),
                    allow_domains: vec!["example.com".into()],
                    deny_domains: vec!["example.org".into()],
                    rate: HashMap::from([("default".into(), "1/s".into())]),
                    crawl_max_urls: Some(1),
                    crawl_parallel: Some(1),
                    crawl_robots: Some(webpilot::config::RobotsRule::Obey),
                    actions: webpilot::config::ActionsConfig {
                        deny: vec!["evaluate".into()],
                        confirm: vec!["download".into()],
                    },
                    llm: Some(webpilot::config::LlmConfig::default()),
                };
                let entry = serde_json::to_value(entry).unwrap();
                assert_described(&generated, "### `[[keys]]`", keys(&entry));
            }
            (_, Value::Object(table)) if table.is_empty() => {
                // A table of any keys (`[rate]`).
                let rows = section(&generated, &format!("### `[{key}]`"));
                assert!(rows.contains("Type: table of"), "{key}: {rows}");
            }
            (_, Value::Object(_)) => {
                assert_described(&generated, &format!("### `[{key}]`"), keys(value));
            }
            _ => top.push(key.clone()),
        }
    }
    assert_described(&generated, "### Top level", top);
}

#[test]
fn the_example_loads_as_a_service_would() {
    let config: Config = toml::from_str(reference::EXAMPLE).unwrap();
    config.validate().unwrap();
    webpilot::tenancy::Tenants::from_config(&config).unwrap();
    assert!(committed().contains(reference::EXAMPLE));
}
