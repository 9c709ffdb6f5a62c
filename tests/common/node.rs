//! Node packages from npm under target/, installed once and shared by the test binaries:
//! Playwright Test (no browser download: the tests point it at Debian's Chromium) for exported
//! specs, and Node 22 with the official MCP conformance suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The newest Playwright for the Node.js at hand (1.62 and later need Node 20).
fn version() -> &'static str {
    let major = Command::new("node")
        .args(["-p", "process.versions.node.split('.')[0]"])
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<u32>().ok())
        .expect("node is installed (scripts/setup --test)");
    if major >= 20 { "1.65.2" } else { "1.61.0" }
}

/// The folder whose node_modules holds @playwright/test; specs run from folders inside it.
pub fn playwright_home() -> &'static PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let want = version();
        npm_home(
            "pw-node",
            ("@playwright/test", want),
            &[format!("@playwright/test@{want}")],
        )
    })
}

/// The official MCP conformance suite's version the tests run.
const CONFORMANCE: &str = "0.1.16";

/// Node.js 22 and the official MCP conformance suite from npm under target/mcp-conformance
/// (the suite needs Node 22; Debian's is older): the command that runs the suite.
pub fn conformance_command() -> Command {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    let suite = "@modelcontextprotocol/conformance";
    let home = HOME.get_or_init(|| {
        npm_home(
            "mcp-conformance",
            (suite, CONFORMANCE),
            &["node@22".into(), format!("{suite}@{CONFORMANCE}")],
        )
    });
    let mut command = Command::new(home.join("node_modules/.bin/node"));
    command.arg(home.join(format!("node_modules/{suite}/dist/index.js")));
    command
}

/// `target/<folder>` with `packages` npm-installed, once (under a lock shared by the test
/// binaries): again only when `marker`'s installed version is not the one wanted.
fn npm_home(folder: &str, marker: (&str, &str), packages: &[String]) -> PathBuf {
    let home = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(folder);
    let (package, want) = marker;
    if installed(&home, package).as_deref() == Some(want) {
        return home;
    }
    let _guard = install_lock(&home);
    if installed(&home, package).as_deref() != Some(want) {
        std::fs::create_dir_all(&home).unwrap();
        let manifest = serde_json::json!({"name": folder, "private": true});
        std::fs::write(home.join("package.json"), manifest.to_string()).unwrap();
        let status = Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(&home)
            .args(["--no-audit", "--no-fund", "--loglevel=error"])
            .args(packages)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "npm install {packages:?} failed"
        );
    }
    home
}

/// The version of `package` installed under `home`.
fn installed(home: &Path, package: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(home.join("node_modules").join(package).join("package.json"))
            .ok()?;
    let package: serde_json::Value = serde_json::from_str(&text).ok()?;
    package["version"].as_str().map(str::to_string)
}

fn install_lock(home: &Path) -> std::fs::File {
    std::fs::create_dir_all(home.parent().unwrap()).unwrap();
    let file = std::fs::File::create(home.with_extension("lock")).expect("npm lock file");
    file.lock().expect("npm lock");
    file
}

/// Runs `spec` (TypeScript) with Playwright Test on Debian's Chromium; the run's output, and
/// whether it passed.
pub fn run_spec(spec: &str, env: &[(&str, &str)]) -> (bool, String) {
    let home = playwright_home();
    let dir = tempfile::Builder::new()
        .prefix("spec-")
        .tempdir_in(home)
        .unwrap();
    std::fs::write(dir.path().join("exported.spec.ts"), spec).unwrap();
    let config = "import { defineConfig } from '@playwright/test';\n\
        export default defineConfig({ testDir: '.', outputDir: 'results', reporter: 'line', timeout: 60000, workers: 1,\n\
          use: { headless: true, launchOptions: { executablePath: '/usr/bin/chromium',\n\
            args: ['--no-sandbox', '--no-proxy-server', '--disable-background-networking'] } } });\n";
    std::fs::write(dir.path().join("playwright.config.ts"), config).unwrap();
    let output = Command::new("node")
        .arg(home.join("node_modules/@playwright/test/cli.js"))
        .arg("test")
        .arg("--config")
        .arg(dir.path().join("playwright.config.ts"))
        .current_dir(dir.path())
        .envs(env.iter().copied())
        .output()
        .expect("node runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}
