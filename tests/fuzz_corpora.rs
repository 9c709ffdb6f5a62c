//! Every input the fuzzers kept (`fuzz/corpus/<target>/`) and every one that once failed
//! (`fuzz/found/<target>/`), run through the same functions as under libFuzzer
//! (`webpilot::fuzzing`), on the stable toolchain: each returns, none panics. A target with no
//! corpus fails, so a renamed target cannot pass by running nothing.

use std::path::{Path, PathBuf};

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn every_kept_input_of_every_target_is_answered_without_a_panic() {
    for (target, run) in webpilot::fuzzing::TARGETS {
        let kept = inputs("corpus", target);
        assert!(
            kept.len() >= 5,
            "fuzz/corpus/{target} holds {} inputs: run scripts/fuzz to grow it",
            kept.len()
        );
        for file in kept.iter().chain(&inputs("found", target)) {
            let data = std::fs::read(file).unwrap();
            let answered = std::panic::catch_unwind(|| run(&data));
            assert!(answered.is_ok(), "{target} panicked on {}", file.display());
        }
    }
}
