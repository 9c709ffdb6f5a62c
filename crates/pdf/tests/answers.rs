//! The `webpilot-pdf` program as webpilot runs it: bytes in, one JSON answer out.

use std::io::Write;
use std::process::{Command, Stdio};

use webpilot_pdf::Answer;

fn run(args: &[&str], bytes: &[u8]) -> (Option<Answer>, i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_webpilot-pdf"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the reader starts");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    (
        serde_json::from_slice(&output.stdout).ok(),
        output.status.code().unwrap_or(-1),
    )
}

#[test]
fn garbage_is_answered_as_broken() {
    for args in [
        &["read"][..],
        &["read", "--text", "--with-links"],
        &["pages"],
    ] {
        let (answer, code) = run(args, b"%PDF-1.4\n1 0 obj << /Type /Catalog");
        assert_eq!(code, 0, "{args:?}");
        assert!(
            matches!(answer, Some(Answer::Broken(_))),
            "{args:?}: {answer:?}"
        );
    }
}

#[test]
fn a_wrong_call_is_refused_with_its_usage() {
    for args in [&[][..], &["read", "--bold"], &["print"]] {
        let (answer, code) = run(args, b"");
        assert_eq!((answer, code), (None, 2), "{args:?}");
    }
}

#[test]
fn serve_answers_one_document_after_another() {
    let garbage = b"%PDF-1.4\n1 0 obj << /Type /Catalog";
    let mut input = Vec::new();
    for job in [r#"{"bytes":N}"#, r#"{"pages_only":true,"bytes":N}"#] {
        input.extend(job.replace('N', &garbage.len().to_string()).bytes());
        input.push(b'\n');
        input.extend(garbage);
    }
    let output = Command::new(env!("CARGO_BIN_EXE_webpilot-pdf"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(&input)?;
            child.wait_with_output()
        })
        .unwrap();
    let answers: Vec<Answer> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(output.status.success());
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|answer| matches!(answer, Answer::Broken(_)))
    );
}
