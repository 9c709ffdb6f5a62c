//! The `webpilot-pdf` processes: found beside webpilot, started under limits, kept for a few
//! documents (starting one costs more than reading a short PDF), killed when their caller stops
//! waiting. The wire is `webpilot-pdf serve`'s (`crates/pdf-wire`): a line of JSON (`Job`) and
//! the document's bytes in, a line of JSON (`Answer`) out.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, LazyLock, Mutex};

pub(super) use webpilot_pdf_wire::{Answer, Document, Job};

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::sync::Locked;

const READER: &str = "webpilot-pdf";
const READER_VARIABLE: &str = "WEBPILOT_PDF_READER";
/// Address space a reader may take (a 64 MiB PDF parses in well under 1 GiB).
const READER_MEMORY: u64 = 4 << 30;
/// CPU time a reader may use in its life: one left running (its service gone, a document it
/// loops on) stops by itself.
const READER_CPU_SECONDS: u64 = 600;
/// Documents a reader reads before a fresh one takes over.
const READER_USES: u32 = 64;

/// Readers waiting for a document, at most one per core.
static IDLE: Mutex<Vec<Reader>> = Mutex::new(Vec::new());
/// The machine's cores, read once (the standard library reads cgroup files to count them).
static CORES: LazyLock<usize> =
    LazyLock::new(|| std::thread::available_parallelism().map_or(1, usize::from));

/// Has the installed reader do `job` on `bytes`. Dropping the future kills the reader.
pub(super) async fn ask(job: Job, bytes: Vec<u8>) -> ToolResult<Answer> {
    ask_program(&program()?, job, bytes).await
}

/// Has `program` do `job`: an idle reader if one waits (a fresh one if that one has died
/// meanwhile), else a fresh one.
async fn ask_program(program: &Path, job: Job, bytes: Vec<u8>) -> ToolResult<Answer> {
    // Shared by the exchange with an idle reader and, if that one has died, a fresh one's.
    let bytes = Arc::new(bytes);
    if let Some(reader) = idle(program)
        && let Some(answer) = exchange(reader, job, bytes.clone()).await?
    {
        return Ok(answer);
    }
    let reader = Reader::start(program).map_err(|e| {
        ToolError::internal(format!(
            "starting the PDF reader {}: {e}",
            program.display()
        ))
    })?;
    exchange(reader, job, bytes)
        .await?
        .ok_or_else(stopped_without_answer)
}

fn stopped_without_answer() -> ToolError {
    super::broken(&format!(
        "the reader stopped without an answer (a document that takes more than {} GiB of memory stops it)",
        READER_MEMORY >> 30
    ))
}

/// Runs one exchange on the blocking pool; the reader goes back to wait for the next document
/// when it answered. `None`: it stopped without an answer.
async fn exchange(mut reader: Reader, job: Job, bytes: Arc<Vec<u8>>) -> ToolResult<Option<Answer>> {
    let pid = reader.child.id();
    let talking = tokio::task::spawn_blocking(move || {
        let answer = reader.exchange(job, &bytes);
        (reader, answer)
    });
    // Dropped before `talking` when the caller stops waiting: kills the reader, which
    // `talking`'s thread then reaps.
    let killer = Killer(Some(pid));
    let (reader, answer) = talking
        .await
        .map_err(|e| ToolError::internal(format!("PDF reading failed: {e}")))?;
    killer.disarm();
    let answer = answer
        .ok()
        .and_then(|line| serde_json::from_str::<Answer>(&line).ok());
    if answer.is_some() {
        reader.rest();
    }
    Ok(answer)
}

/// A running `webpilot-pdf serve`.
struct Reader {
    program: PathBuf,
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    uses: u32,
}

impl Reader {
    fn start(program: &Path) -> std::io::Result<Reader> {
        let mut command = Command::new(program);
        command
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec only setrlimit, which is async-signal-safe, is called.
        unsafe {
            command.pre_exec(|| {
                for (resource, limit) in [
                    (libc::RLIMIT_AS, READER_MEMORY),
                    (libc::RLIMIT_CPU, READER_CPU_SECONDS),
                ] {
                    let limit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    libc::setrlimit(resource, &limit);
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("started without its pipes"));
        };
        Ok(Reader {
            program: program.to_path_buf(),
            child,
            input,
            output: BufReader::new(output),
            uses: 0,
        })
    }

    /// Sends one job and its bytes, and reads the answer's line.
    fn exchange(&mut self, job: Job, bytes: &[u8]) -> std::io::Result<String> {
        self.uses += 1;
        let mut line = serde_json::to_vec(&Job {
            bytes: bytes.len(),
            ..job
        })?;
        line.push(b'\n');
        self.input.write_all(&line)?;
        self.input.write_all(bytes)?;
        self.input.flush()?;
        let mut answer = String::new();
        match self.output.read_line(&mut answer)? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(answer),
        }
    }

    /// Waits for the next document, unless it has read its share or enough readers wait (then
    /// it is stopped, outside the pool's lock).
    fn rest(self) {
        let mut idle = IDLE.locked();
        if self.uses < READER_USES && idle.len() < *CORES {
            idle.push(self);
            return;
        }
        drop(idle);
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An idle reader of `program`.
fn idle(program: &Path) -> Option<Reader> {
    let mut idle = IDLE.locked();
    let at = idle.iter().position(|reader| reader.program == program)?;
    Some(idle.swap_remove(at))
}

/// Kills a reader's process when dropped armed.
struct Killer(Option<u32>);

impl Killer {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Killer {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2) on a child not yet reaped (its `Reader`, which reaps it, is alive
            // in the exchange this guard outlives), so the pid is still that child's.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// The reader: where `WEBPILOT_PDF_READER` points, else beside this program (or one folder up,
/// where cargo puts a test's program under `deps/`), else on the `PATH`.
fn program() -> ToolResult<PathBuf> {
    program_from(std::env::var_os(READER_VARIABLE).map(PathBuf::from))
}

fn program_from(variable: Option<PathBuf>) -> ToolResult<PathBuf> {
    if let Some(path) = variable {
        return match path.is_file() {
            true => Ok(path),
            false => Err(missing_reader(format!(
                "{READER_VARIABLE} names {}, which is not webpilot's PDF reader ({READER})",
                path.display()
            ))),
        };
    }
    let here = std::env::current_exe().ok();
    let beside = here
        .iter()
        .flat_map(|exe| exe.ancestors().skip(1).take(2))
        .map(|dir| dir.join(READER));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(READER));
    beside
        .chain(on_path)
        .find(|path| path.is_file())
        .ok_or_else(|| {
            missing_reader(format!(
                "webpilot's PDF reader ({READER}) is not installed beside webpilot"
            ))
        })
}

fn missing_reader(message: String) -> ToolError {
    ToolError::new(ErrorCode::NotConfigured, message).with_hint(format!(
        "on a first run ./scripts/serve builds it after the service starts: retry in a few minutes; \
         else build it with `cargo build --release -p {READER}` or set {READER_VARIABLE} to its path"
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};

    use super::*;

    /// A stand-in reader: a shell script.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::yield_now();
        }
    }

    fn pages_only() -> Job {
        Job {
            pages_only: true,
            ..Job::default()
        }
    }

    #[test]
    fn a_missing_reader_says_how_to_get_it() {
        let error = program_from(Some("/nonexistent/webpilot-pdf".into())).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotConfigured);
        assert!(
            error.message.contains("/nonexistent/webpilot-pdf"),
            "{}",
            error.message
        );
        assert!(
            error.hint.contains("cargo build --release -p webpilot-pdf"),
            "{}",
            error.hint
        );
        // Beside the test's program, cargo built it.
        assert!(program_from(None).is_ok_and(|path| path.ends_with(READER)));
    }

    #[tokio::test]
    async fn a_reader_waits_for_the_next_document() {
        let program = program_from(None).unwrap();
        let garbage = b"%PDF-1.4\n1 0 obj << /Type /Catalog".to_vec();
        let mut pid = None;
        for uses in 1..=3 {
            let answer = ask_program(&program, pages_only(), garbage.clone()).await;
            assert!(matches!(answer, Ok(Answer::Broken(_))), "{answer:?}");
            let reader = idle(&program).expect("the reader waits");
            assert_eq!(reader.uses, uses);
            assert_eq!(*pid.get_or_insert(reader.child.id()), reader.child.id());
            reader.rest();
        }
    }

    // The reader starts on another thread while this one watches for it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_nobody_waits_for_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let reader = script(
            dir.path(),
            "silent",
            &format!(
                "echo $$ > {}.part && mv {0}.part {0}; exec sleep 600",
                pid_file.display()
            ),
        );
        let reading =
            tokio::spawn(
                async move { ask_program(&reader, Job::default(), b"%PDF-".to_vec()).await },
            );
        until("the reader started", || pid_file.exists());
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.split(' ').nth(2).is_none_or(|state| state != "Z"))
        };
        assert!(alive());
        reading.abort();
        until("the reader was killed", || !alive());
    }

    #[tokio::test]
    async fn a_reader_may_not_take_more_than_its_memory() {
        let dir = tempfile::tempdir().unwrap();
        // Answers if it could take `size` of address space.
        let taking = |name: &str, size: &str| {
            script(
                dir.path(),
                name,
                &format!(
                    "exec python3 -c 'import sys; bytearray({size}); print(chr(34) + \"encrypted\" + chr(34))'"
                ),
            )
        };
        let answer = ask_program(&taking("small", "1 << 30"), Job::default(), Vec::new()).await;
        assert!(matches!(answer, Ok(Answer::Encrypted)), "{answer:?}");
        let answer = ask_program(&taking("large", "5 << 30"), Job::default(), Vec::new()).await;
        let error = answer.expect_err("the reader ran out of memory");
        assert_eq!(error.code, ErrorCode::Upstream);
        assert!(
            error.message.contains("stopped without an answer"),
            "{}",
            error.message
        );
    }
}
