//! A Python venv under target/ with the official MCP SDK, schemathesis and the libraries people
//! write office documents with, made once (pip from PyPI) and shared by the test binaries that
//! drive webpilot from Python or read what Python wrote.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// What the venv must hold, as pip requirements.
const REQUIREMENTS: [&str; 7] = [
    "mcp>=1.10,<2",
    "schemathesis>=4.3,<5",
    "python-docx>=1.1,<2",
    "openpyxl>=3.1,<4",
    "python-pptx>=1.0,<2",
    "odfpy>=1.4,<2",
    "msoffcrypto-tool>=5.4,<7",
];

/// The venv's python, made and filled on first use.
pub fn python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py-venv");
        let python = venv.join("bin/python");
        if !ready(&python) {
            // Test binaries run one after another, but a developer may run two at once.
            let _guard = venv_lock();
            if !ready(&python) {
                let made = Command::new("python3")
                    .arg("-m")
                    .arg("venv")
                    .arg(&venv)
                    .status();
                assert!(made.is_ok_and(|s| s.success()), "python3 -m venv failed");
                let installed = Command::new(venv.join("bin/pip"))
                    .args(["install", "-q"])
                    .args(REQUIREMENTS)
                    .status();
                assert!(installed.is_ok_and(|s| s.success()), "pip install failed");
            }
        }
        python
    })
}

fn ready(python: &PathBuf) -> bool {
    Command::new(python)
        .args([
            "-c",
            "import mcp, schemathesis, docx, openpyxl, pptx, odf, msoffcrypto",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// An exclusive lock on a file beside the venv, held while it is built.
fn venv_lock() -> std::fs::File {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py-venv.lock");
    let file = std::fs::File::create(path).expect("venv lock file");
    file.lock().expect("venv lock");
    file
}
