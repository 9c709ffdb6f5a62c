//! `webpilot-pdf`: webpilot's PDF reader as a program. Each answer is one line of JSON
//! (`webpilot_pdf::Answer`) on standard output.
//!
//! ```text
//! webpilot-pdf read [--text] [--links-only] [--with-links] < file.pdf
//! webpilot-pdf pages < file.pdf
//! webpilot-pdf serve     # documents one after another: a line of JSON (`Job`), then its bytes
//! ```
//!
//! webpilot runs `serve` and keeps the process for a few documents (the parser's start-up,
//! compiling its patterns, costs more than reading a short document), within limits on time and
//! memory.

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

use webpilot_pdf::{Answer, Job, page_count, read, run};

const USAGE: &str = "usage: webpilot-pdf read [--text] [--links-only] [--with-links] < file.pdf \
     | webpilot-pdf pages < file.pdf | webpilot-pdf serve";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, flags)) = args.split_first() else {
        return usage("");
    };
    let mut job = Job::default();
    for flag in flags {
        match flag.as_str() {
            "--text" => job.text = true,
            "--links-only" => job.links_only = true,
            "--with-links" => job.with_links = true,
            other => return usage(&format!("unknown option {other}")),
        }
    }
    let result = match command.as_str() {
        "read" => whole_input().map(|bytes| read(bytes, &job)),
        "pages" => whole_input().map(page_count),
        "serve" => return finish(serve()),
        other => return usage(&format!("unknown command {other}")),
    };
    finish(result.and_then(|answer| answer_line(&mut std::io::stdout().lock(), &answer)))
}

fn usage(why: &str) -> ExitCode {
    eprintln!("webpilot-pdf: {why}\n{USAGE}");
    ExitCode::from(2)
}

fn finish(result: std::io::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("webpilot-pdf: {e}");
            ExitCode::FAILURE
        }
    }
}

fn whole_input() -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Jobs until standard input ends (webpilot closed it, or went away).
fn serve() -> std::io::Result<()> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let job: Job = serde_json::from_str(&line).map_err(std::io::Error::other)?;
        let mut bytes = vec![0; job.bytes];
        input.read_exact(&mut bytes)?;
        answer_line(&mut output, &run(&job, bytes))?;
    }
}

fn answer_line(output: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    serde_json::to_writer(&mut *output, answer)?;
    output.write_all(b"\n")?;
    output.flush()
}
