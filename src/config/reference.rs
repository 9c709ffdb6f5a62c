//! docs/configuration.md, generated from the definitions themselves so that it cannot drift: the
//! file's settings from the JSON Schema schemars derives for `Config` (keys and tables, types,
//! doc comments, defaults from `#[serde(default)]` and `Default`), the flags and their
//! environment variables from clap's definition of `ConfigArgs`. `webpilot config-reference`
//! prints it; tests/configuration_doc.rs keeps the committed file equal to it.

use clap::Args as _;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::{Config, ConfigArgs};

/// The command that rewrites docs/configuration.md, run in the repository's root.
pub const REGENERATE: &str = "cargo run -q -- config-reference > docs/configuration.md";

/// A field's default as the reference should state it, when the value `Default` computes
/// depends on the machine (`#[schemars(extend("x-default-text" = "…"))]`, Markdown).
const DEFAULT_TEXT: &str = "x-default-text";

/// A small `webpilot.toml`; it is a valid configuration (the test of the reference loads it).
pub const EXAMPLE: &str = r#"# Listening off loopback needs a token or tenants' keys.
bind = "0.0.0.0"
port = 8931
data_dir = "/var/lib/webpilot"
max_sessions = 8

[fetch]
allow = ["127.0.0.1"]              # private targets reached anyway: an app on this machine
deny_domains = ["*.bank.example"]

[crawl]
max_urls = 1000

[rate]
web_search = "10/min"
default = "120/min"

[[keys]]                           # `webpilot keys add alice` writes such entries
tenant = "alice"
sha256 = "69fc7b5f5ab1b96b3197f9294623a098d6b9cde36fc2ab3015ab593cb070d3e8"
max_sessions = 2
"#;

/// What comes before the reference itself: where settings come from.
const INTRODUCTION: &str = "\
Settings come from four places, each overriding the one before:

1. the defaults below;
2. a TOML file: the one `--config FILE` (or `WEBPILOT_CONFIG`) names, else `webpilot.toml` in \
the working directory if there is one;
3. `WEBPILOT_*` environment variables;
4. command-line flags.

Every setting can be given in the file, where an unknown key is an error; the common ones also \
have a flag and an environment variable ([Flags](#flags-and-environment-variables)). Tenants' \
keys (`[[keys]]` entries) may also live in a keys file of their own (`keys_file`), which \
`webpilot keys add NAME` writes.

One environment variable is read outside this configuration: `WEBPILOT_LOG` (the log filter, \
e.g. `debug`).
";

/// A part of the file: its top level, a table (`[fetch]`) or an array of tables (`[[keys]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The TOML key of the table (`fetch`, `keys`); empty for the top level.
    pub key: String,
    /// How the file opens it (`[fetch]`, `[[keys]]`); empty for the top level.
    pub header: String,
    /// What the table is for (the field's doc comment).
    pub description: String,
    /// The table's settings, in the order the code declares them.
    pub settings: Vec<Setting>,
    /// For a table of any keys (`[rate]`): the type of its values.
    pub values: Option<String>,
}

/// One setting of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Its key within its section.
    pub key: String,
    /// Its type, in words (`integer`, `array of strings`).
    pub kind: String,
    /// Its default, Markdown (`` `8931` ``, `none`, `required`).
    pub default: String,
    /// Its doc comment, on one line.
    pub description: String,
}

/// One command-line flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// `--bind`.
    pub long: String,
    /// The name of its value (`BIND`).
    pub value: String,
    /// Its environment variable (`WEBPILOT_BIND`).
    pub env: Option<String>,
    /// Its help text, on one line.
    pub help: String,
    /// The values it takes when they are a fixed set (`true`, `false`).
    pub choices: Vec<String>,
}

/// The file's settings: the top level first, then each table in the order of the code.
pub fn sections() -> Vec<Section> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Config>()
        .to_value();
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut top = Section {
        key: String::new(),
        header: String::new(),
        description: one_line(text(&schema, "description")),
        settings: Vec::new(),
        values: None,
    };
    let mut tables = Vec::new();
    for (key, property) in properties(&schema) {
        let field = resolve(property, defs);
        let items = field.get("items").map(|items| resolve(items, defs));
        if let Some(items) = items.filter(|items| items.get("properties").is_some()) {
            tables.push(table(key, format!("[[{key}]]"), &field, &items, defs));
        } else if field.get("properties").is_some() {
            tables.push(table(key, format!("[{key}]"), &field, &field, defs));
        } else if let Some(values) = field.get("additionalProperties").filter(|v| v.is_object()) {
            tables.push(Section {
                key: key.clone(),
                header: format!("[{key}]"),
                description: one_line(text(&field, "description")),
                settings: Vec::new(),
                values: Some(kind(&resolve(values, defs), defs)),
            });
        } else {
            top.settings.push(setting(key, &field, &[], defs));
        }
    }
    std::iter::once(top).chain(tables).collect()
}

/// A table of settings: `field` says what it is for, `body` holds its properties.
fn table(
    key: &str,
    header: String,
    field: &Value,
    body: &Value,
    defs: &Map<String, Value>,
) -> Section {
    let required: Vec<&str> = body
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Section {
        key: key.to_string(),
        header,
        description: one_line(text(field, "description")),
        settings: properties(body)
            .map(|(name, property)| setting(name, &resolve(property, defs), &required, defs))
            .collect(),
        values: None,
    }
}

fn setting(key: &str, field: &Value, required: &[&str], defs: &Map<String, Value>) -> Setting {
    let default = match (field.get(DEFAULT_TEXT), field.get("default")) {
        (Some(text), _) => text.as_str().unwrap_or_default().to_string(),
        (None, Some(value)) => default_value(value),
        (None, None) if required.contains(&key) => "required".to_string(),
        (None, None) => "none".to_string(),
    };
    Setting {
        key: key.to_string(),
        kind: kind(field, defs),
        default,
        description: one_line(text(field, "description")),
    }
}

/// The properties of an object schema, in declaration order.
fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// `schema` with its `$ref` replaced by the definition, the schema's own keywords (a field's
/// description and default) kept over the definition's.
fn resolve(schema: &Value, defs: &Map<String, Value>) -> Value {
    let target = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|path| path.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name));
    let (Some(Value::Object(target)), Value::Object(own)) = (target, schema) else {
        return schema.clone();
    };
    let mut merged = target.clone();
    for (keyword, value) in own {
        if keyword != "$ref" {
            merged.insert(keyword.clone(), value.clone());
        }
    }
    Value::Object(merged)
}

/// A schema's type in words; `null` (an optional setting) is left to the default (`none`).
fn kind(schema: &Value, defs: &Map<String, Value>) -> String {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let named = types
        .into_iter()
        .find(|name| *name != "null")
        .unwrap_or("any");
    let nested = |keyword: &str| {
        let inner = schema.get(keyword).map(|inner| resolve(inner, defs));
        inner.map_or_else(|| "values".to_string(), |inner| plural(&kind(&inner, defs)))
    };
    let kind = match (named, text(schema, "format")) {
        ("string", "ip") => "IP address".to_string(),
        ("array", _) => format!("array of {}", nested("items")),
        ("object", _) => format!("table of {}", nested("additionalProperties")),
        (named, _) => named.to_string(),
    };
    match schema.get("enum").and_then(Value::as_array) {
        Some(choices) => {
            let choices: Vec<String> = choices.iter().map(|c| format!("`{c}`")).collect();
            format!("{kind} ({})", choices.join(", "))
        }
        None => kind,
    }
}

/// `strings` for `string`, `strings (…)` for `string (…)`.
fn plural(kind: &str) -> String {
    for word in ["string", "integer", "number", "boolean"] {
        if let Some(rest) = kind.strip_prefix(word)
            && (rest.is_empty() || rest.starts_with(' '))
        {
            return format!("{word}s{rest}");
        }
    }
    kind.to_string()
}

/// A default as TOML, in code; `none` for null and for an empty table.
fn default_value(value: &Value) -> String {
    match value {
        Value::Null => "none".to_string(),
        Value::Object(map) if map.is_empty() => "none".to_string(),
        value => format!("`{}`", toml_literal(value)),
    }
}

/// `value` written as TOML writes it; this version's number in a string reads `<version>`.
fn toml_literal(value: &Value) -> String {
    match value {
        Value::String(text) => {
            let version = concat!("webpilot/", env!("CARGO_PKG_VERSION"));
            Value::String(text.replace(version, "webpilot/<version>")).to_string()
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{key} = {}", toml_literal(value)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
        Value::Null => "none".to_string(),
        other => other.to_string(),
    }
}

/// The string keyword `name` of `schema`, empty if it has none.
fn text<'a>(schema: &'a Value, name: &str) -> &'a str {
    schema.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// Doc comment lines joined into one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The command line's flags, as the `serve` command (and every other) takes them.
pub fn flags() -> Vec<Flag> {
    let command = ConfigArgs::augment_args(clap::Command::new("webpilot"));
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let value = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string);
            let help = arg.get_long_help().or_else(|| arg.get_help());
            Some(Flag {
                long: format!("--{long}"),
                value,
                env: arg.get_env().map(|env| env.to_string_lossy().into_owned()),
                help: one_line(&help.map(ToString::to_string).unwrap_or_default()),
                choices: arg
                    .get_possible_values()
                    .iter()
                    .filter(|choice| !choice.is_hide_set())
                    .map(|choice| choice.get_name().to_string())
                    .collect(),
            })
        })
        .collect()
}

/// docs/configuration.md.
pub fn markdown() -> String {
    let mut out = format!(
        "# Configuration\n\n<!-- Generated from src/config/ by `{REGENERATE}`: edit the doc \
         comments there, not this file. -->\n\n{INTRODUCTION}\n## Example\n\n```toml\n{EXAMPLE}```\n\n\
         ## Settings of the file\n"
    );
    for section in sections() {
        out.push_str(&section_markdown(&section));
    }
    out.push_str(&flags_markdown(&flags()));
    out
}

fn section_markdown(section: &Section) -> String {
    let mut out = if section.header.is_empty() {
        "\n### Top level\n\n".to_string()
    } else {
        format!("\n### `{}`\n\n{}\n\n", section.header, section.description)
    };
    if let Some(values) = &section.values {
        out.push_str(&format!(
            "Type: table of {} (any keys); default: none.\n",
            plural(values)
        ));
        return out;
    }
    out.push_str("| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n");
    for setting in &section.settings {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            setting.key,
            cell(&setting.kind),
            cell(&setting.default),
            cell(&setting.description)
        ));
    }
    out
}

fn flags_markdown(flags: &[Flag]) -> String {
    let mut out = "\n## Flags and environment variables\n\n\
        A flag wins over its environment variable, and both over the file. Flags may come before \
        or after the command (`webpilot --port 9000 serve`, `webpilot serve --port 9000`); a list \
        is comma-separated (`--fetch-allow 127.0.0.1,10.0.0.0/8`).\n\n\
        | Flag | Environment variable | Description |\n| --- | --- | --- |\n"
        .to_string();
    for flag in flags {
        // Help is plain text: a `*.domain` must not start emphasis.
        let mut help = flag.help.replace('*', "\\*");
        if !flag.choices.is_empty() {
            let choices: Vec<String> = flag.choices.iter().map(|c| format!("`{c}`")).collect();
            help.push_str(&format!(" (values: {})", choices.join(", ")));
        }
        let env = flag
            .env
            .as_deref()
            .map_or("—".to_string(), |env| format!("`{env}`"));
        out.push_str(&format!(
            "| `{} <{}>` | {env} | {} |\n",
            flag.long,
            flag.value,
            cell(&help)
        ));
    }
    out
}

/// Text safe in a Markdown table's cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_is_a_valid_configuration() {
        let config: Config = toml::from_str(EXAMPLE).unwrap();
        config.validate().unwrap();
        assert_eq!(config.keys.len(), 1);
    }

    #[test]
    fn nested_tables_and_their_defaults_are_read_from_the_schema() {
        let sections = sections();
        let fetch = sections.iter().find(|s| s.key == "fetch").unwrap();
        assert_eq!(fetch.header, "[fetch]");
        let redirects = fetch.settings.iter().find(|s| s.key == "max_redirects");
        assert_eq!(redirects.unwrap().default, "`10`");
        let keys = sections.iter().find(|s| s.key == "keys").unwrap();
        assert_eq!(keys.header, "[[keys]]");
        assert_eq!(keys.settings[0].default, "required");
        let rate = sections.iter().find(|s| s.key == "rate").unwrap();
        assert_eq!(rate.values.as_deref(), Some("string"));
        let order = sections
            .iter()
            .find(|s| s.key == "search")
            .unwrap()
            .settings[0]
            .clone();
        assert!(
            order
                .kind
                .starts_with("array of strings (`\"duckduckgo\"`, "),
            "{order:?}"
        );
    }
}
