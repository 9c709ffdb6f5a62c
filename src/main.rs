//! The `webpilot` binary; the command line is `webpilot::cli`.

fn main() -> std::process::ExitCode {
    tune_malloc();
    webpilot::cli::main()
}

/// Two glibc settings, each kept when the environment sets its `MALLOC_*_` variable:
/// - Arenas: glibc gives threads that allocate at the same time arenas of their own, up to eight
///   per core, and keeps what was freed in each: pages read on the blocking pool's many threads
///   left a 10,000-page crawl at a 202 MiB peak on 2 cores, against 93 MiB with one arena per
///   core at the same pages per second.
/// - Trim threshold: by default glibc raises it (and the size above which a block is its own
///   mapping) each time a large block is freed, up to 32 MiB, so after a few screenshots and
///   pages the heap stops giving freed memory back. Fixed at 1 MiB, large blocks stay mappings
///   returned on free and the heap's free top goes back to the system: the service's RSS right
///   after the bench's sequences went from 51–54 MiB to 47–48 MiB at the same speed.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let unset = |name: &str| std::env::var_os(name).is_none();
        if unset("MALLOC_ARENA_MAX") {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
            // SAFETY: called first thing in main, before any other thread exists or allocates.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, arenas);
            }
        }
        if unset("MALLOC_TRIM_THRESHOLD_") {
            // SAFETY: as above.
            unsafe {
                libc::mallopt(libc::M_TRIM_THRESHOLD, 1024 * 1024);
            }
        }
    }
}
