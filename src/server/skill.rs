//! `webpilot skill`: a SKILL.md (the format Claude Code reads from `~/.claude/skills/`, and many
//! other agents too) that teaches a coding agent to use webpilot through `webpilot call`,
//! generated from the registry's specs so it cannot drift from the tools.

use std::fmt::Write;

use crate::config::DEFAULT_PORT;
use crate::error::ErrorCode;
use crate::tools::{Scope, ToolSpec};

const DESCRIPTION: &str = "Browse and read the web from the command line: open JavaScript \
pages in a real headless Chromium and read them as Markdown or numbered interactive elements, \
click and type by number, take annotated screenshots, keep logins as cookie profiles, search the \
web and read pages without a browser, crawl many URLs. Use when a task needs a live web page, a \
login, a screenshot or a web search.";

/// The SKILL.md text.
pub fn skill(specs: &[ToolSpec]) -> String {
    let usage = USAGE.replace("{port}", &DEFAULT_PORT.to_string());
    let mut text =
        format!("---\nname: webpilot\ndescription: {DESCRIPTION}\n---\n\n# webpilot\n\n{usage}");
    let _ = writeln!(text, "\n## Tools\n");
    for spec in specs {
        let scope = match spec.scope {
            Scope::Browser => "browser session",
            Scope::Web => "no browser",
            Scope::Task => "background task",
        };
        let _ = writeln!(
            text,
            "### {} ({scope})\n\n{}\n\n{}\n\n```sh\nwebpilot call {} '{}'\n```\n",
            spec.name, spec.description, spec.guide, spec.name, spec.example
        );
    }
    let _ = writeln!(
        text,
        "## Errors\n\nA failed call prints `{{\"error\": {{\"code\", \"message\", \"hint\"}}}}` \
         and exits with status 1; the hint says how to recover. The codes:\n"
    );
    for code in ErrorCode::ALL {
        let _ = writeln!(text, "- `{}`: {}", code.name(), code.default_hint());
    }
    text
}

const USAGE: &str = "\
`webpilot call TOOL 'JSON'` runs one tool and prints its result as JSON (`-o FILE` writes an \
image a tool returns, such as a screenshot). Each `webpilot call` starts its own browser, so a \
session lives for one command; for several steps on one page (open, read, click), run the service \
once (`webpilot serve`) and POST the same JSON to `http://127.0.0.1:{port}/api/tools/TOOL` with a \
header `X-Webpilot-Session: NAME`, or connect over MCP (`webpilot mcp`).

- Read a page: `browser_navigate` with `target`, then `browser_read` (`mode=markdown` for text, \
`mode=elements` for the numbered list of links, buttons and fields).
- Act: `browser_interact` with `action` and the `ref` number from the element list.
- Long results are paged: pass `next_cursor` back as `cursor`.
- Without a browser: `web_search`, then `open_web_page` with a result's `url`.
- `webpilot tools` prints every tool's full argument schema.
";
