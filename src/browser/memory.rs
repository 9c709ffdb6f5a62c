//! The browser's memory: the proportional set size (PSS) of the Chromium process and all its
//! descendants (renderers, GPU, utilities), read from `/proc`. PSS splits shared pages among
//! the processes sharing them, so the sum is what the browser really costs the machine.

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A reading is reused this long: summing a hundred processes' memory costs milliseconds.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The latest reading, by browser process.
#[derive(Default)]
pub struct MemoryGauge {
    latest: Mutex<Option<(u32, Instant, u64)>>,
}

impl MemoryGauge {
    /// The PSS in bytes of process `pid` and its descendants; none when `/proc` cannot tell.
    pub async fn pss(&self, pid: u32) -> Option<u64> {
        if let Some((seen, at, bytes)) = *self.latest.locked()
            && seen == pid
            && at.elapsed() < FRESH_FOR
        {
            return Some(bytes);
        }
        let bytes = tokio::task::spawn_blocking(move || tree_pss(pid))
            .await
            .ok()
            .flatten()?;
        *self.latest.locked() = Some((pid, Instant::now(), bytes));
        Some(bytes)
    }
}

/// Sums the PSS of `root` and every process below it.
fn tree_pss(root: u32) -> Option<u64> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(parent) = parent_of(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut total = process_pss(root)?;
    let mut stack = children.remove(&root).unwrap_or_default();
    while let Some(pid) = stack.pop() {
        total += process_pss(pid).unwrap_or(0);
        stack.extend(children.remove(&pid).unwrap_or_default());
    }
    Some(total)
}

/// The parent pid from `/proc/<pid>/stat` (the field after the state, past the command name,
/// which may hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `Pss:` of `/proc/<pid>/smaps_rollup`, in bytes.
fn process_pss(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    rollup.lines().find_map(|line| {
        let kb = line.strip_prefix("Pss:")?.trim().strip_suffix("kB")?.trim();
        kb.parse::<u64>().ok().map(|kb| kb * 1024)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_tree_has_memory() {
        let own = std::process::id();
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let alone = process_pss(own).unwrap();
        let tree = tree_pss(own).unwrap();
        assert!(alone > 0);
        assert!(tree > alone, "the child's memory counts: {tree} vs {alone}");
        assert_eq!(parent_of(child.id()), Some(own));
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
