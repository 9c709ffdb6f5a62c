//! The `webpilot` binary; the command line is `webpilot::cli`.

fn main() -> std::process::ExitCode {
    webpilot::cli::main()
}
