//! The PDF reader on every input its fuzzer kept (`fuzz/corpus/pdf/`) and every one that once
//! failed (`fuzz/found/pdf/`), as `fuzz/fuzz_targets/pdf.rs` reads them: each is answered (a
//! document, or `Broken`), none panics past the reader's own guard.

use std::path::Path;

use webpilot_pdf::{Answer, Job};

#[test]
fn every_kept_pdf_input_is_answered() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for kind in ["corpus", "found"] {
        if let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join("pdf")) {
            files.extend(entries.map(|e| e.unwrap().path()));
        }
    }
    assert!(
        files.len() >= 5,
        "fuzz/corpus/pdf holds {} inputs",
        files.len()
    );
    let mut documents = 0;
    for file in files {
        let job = Job {
            with_links: true,
            ..Default::default()
        };
        let answer = webpilot_pdf::run(&job, std::fs::read(&file).unwrap());
        documents += usize::from(matches!(answer, Answer::Document(_)));
    }
    assert!(
        documents > 0,
        "no kept input reads as a document: the seeds are gone"
    );
}
