//! Slicing long output to a token budget (`max_tokens`, approximately chars/4) with a cursor for
//! the next slice. Nothing is cut silently: a slice that stops early says `truncated` and
//! carries `next_cursor`.

use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{ToolError, ToolResult};

/// Characters per token, the usual rough estimate for English text and markup.
pub const CHARS_PER_TOKEN: usize = 4;

/// The budget of a long output when the call names none.
pub const DEFAULT_MAX_TOKENS: usize = 4_000;

/// One slice of a longer output.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct Slice {
    /// This slice.
    pub content: String,
    /// More follows: pass `next_cursor` back as `cursor`.
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Slices whole lines: at least one line per slice, as many as fit in the budget.
/// Cursors look like `L42` (the index of the next line).
pub fn slice_lines(lines: &[String], max_tokens: usize, cursor: Option<&str>) -> ToolResult<Slice> {
    let start = parse_cursor(cursor, 'L', lines.len())?;
    let budget = budget_chars(max_tokens);
    let mut used = 0;
    let mut end = start;
    while end < lines.len() {
        let cost = lines[end].chars().count() + 1;
        if end > start && used + cost > budget {
            break;
        }
        used += cost;
        end += 1;
    }
    let truncated = end < lines.len();
    Ok(Slice {
        content: lines[start..end].join("\n"),
        truncated,
        next_cursor: truncated.then(|| format!("L{end}")),
    })
}

/// Slices text by characters, ending at a line break or space near the budget when possible.
/// Cursors look like `C1200` (the char offset of the next slice).
pub fn slice_text(text: &str, max_tokens: usize, cursor: Option<&str>) -> ToolResult<Slice> {
    let total = text.chars().count();
    let start = parse_cursor(cursor, 'C', total)?;
    let budget = budget_chars(max_tokens);
    let rest: Vec<char> = text.chars().skip(start).collect();
    if rest.len() <= budget {
        return Ok(Slice {
            content: rest.into_iter().collect(),
            truncated: false,
            next_cursor: None,
        });
    }
    let window = &rest[..budget];
    // Prefer ending on a line break in the last fifth of the window, then on a space.
    let floor = budget * 4 / 5;
    let cut = last_index_of(window, '\n', floor)
        .or_else(|| last_index_of(window, ' ', floor))
        .map_or(budget, |i| i + 1);
    Ok(Slice {
        content: rest[..cut].iter().collect(),
        truncated: true,
        next_cursor: Some(format!("C{}", start + cut)),
    })
}

/// The token budget a call asked for (`max_tokens`), or the default: at least 1, however large.
pub fn budget(max_tokens: Option<usize>) -> ToolResult<usize> {
    match max_tokens {
        Some(0) => Err(ToolError::invalid(
            "field `max_tokens` must be at least 1 (omit it for the default of 4000)",
        )),
        Some(tokens) => Ok(tokens),
        None => Ok(DEFAULT_MAX_TOKENS),
    }
}

/// A budget in characters: 4 per token, at least one token's worth, without overflow.
pub fn budget_chars(max_tokens: usize) -> usize {
    max_tokens.max(1).saturating_mul(CHARS_PER_TOKEN)
}

fn last_index_of(window: &[char], needle: char, floor: usize) -> Option<usize> {
    window
        .iter()
        .rposition(|&c| c == needle)
        .filter(|&i| i >= floor)
}

/// The offset a cursor like `L42` (kind `L`) names, at most `len`; no cursor is 0.
pub fn parse_cursor(cursor: Option<&str>, kind: char, len: usize) -> ToolResult<usize> {
    let Some(cursor) = cursor.filter(|c| !c.is_empty()) else {
        return Ok(0);
    };
    let bad = || {
        ToolError::invalid(format!(
            "field `cursor`: {cursor:?} is not a cursor of this output"
        ))
        .with_hint(
            "pass the next_cursor of the previous result unchanged, or omit cursor to start over",
        )
    };
    let offset: usize = cursor
        .strip_prefix(kind)
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    if offset > len {
        return Err(bad().with_hint("the content got shorter since; omit cursor to start over"));
    }
    Ok(offset)
}

/// A spreadsheet's rows (`[{"sheet", "rows": [...]}]`) sliced to the budget: whole rows, at
/// least one per slice, only the sheets that have rows in the slice. Cursors look like `R120`
/// (the index of the next row, counted across sheets).
pub fn slice_rows(
    sheets: &serde_json::Value,
    max_tokens: usize,
    cursor: Option<&str>,
) -> ToolResult<(serde_json::Value, Option<String>)> {
    use serde_json::{Value, json};
    let empty = Vec::new();
    let rows_of = |sheet: &Value| sheet["rows"].as_array().unwrap_or(&empty).len();
    let list = sheets.as_array().unwrap_or(&empty);
    let total: usize = list.iter().map(rows_of).sum();
    let start = parse_cursor(cursor, 'R', total)?;
    let budget = budget_chars(max_tokens);
    let (mut index, mut used, mut full, mut out) = (0usize, 0usize, false, Vec::new());
    for sheet in list {
        let mut taken = Vec::new();
        for row in sheet["rows"].as_array().unwrap_or(&empty) {
            if index >= start && !full {
                let size = row.to_string().len();
                full = used + size > budget && used > 0;
                if !full {
                    used += size;
                    taken.push(row.clone());
                }
            }
            index += 1;
        }
        if !taken.is_empty() {
            out.push(json!({"sheet": sheet["sheet"], "rows": taken}));
        }
    }
    let read: usize = out.iter().map(rows_of).sum();
    let next = start + read;
    Ok((
        Value::Array(out),
        (next < total).then(|| format!("R{next}")),
    ))
}

/// Page text in a block that names where it came from, for a model to tell a page's words from
/// its user's. The markers carry a random tag the page cannot know, so text that imitates the
/// end marker does not end the block.
pub fn bounded(content: &str, source: &str) -> String {
    let tag = &crate::ids::unguessable("")[..8];
    format!("<<<page-content {tag} source={source}>>>\n{content}\n<<<end page-content {tag}>>>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_budget_returns_everything() {
        let lines: Vec<String> = (0..3).map(|i| format!("line {i}")).collect();
        let all = slice_lines(&lines, usize::MAX, None).unwrap();
        assert_eq!((all.content.lines().count(), all.truncated), (3, false));
        let text = slice_text("some text", usize::MAX, None).unwrap();
        assert_eq!(
            (text.content.as_str(), text.truncated),
            ("some text", false)
        );
    }

    #[test]
    fn lines_are_returned_exactly_once_across_slices() {
        let lines: Vec<String> = (0..100).map(|i| format!("[{i}] button \"B{i}\"")).collect();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let slice = slice_lines(&lines, 50, cursor.as_deref()).unwrap();
            seen.extend(slice.content.lines().map(str::to_string));
            if !slice.truncated {
                break;
            }
            cursor = slice.next_cursor;
        }
        assert_eq!(seen, lines);
    }

    #[test]
    fn text_slices_rejoin_to_the_original() {
        let text = "héllo wörld ".repeat(500);
        let mut joined = String::new();
        let mut cursor = None;
        loop {
            let slice = slice_text(&text, 100, cursor.as_deref()).unwrap();
            assert!(slice.content.chars().count() <= 400);
            joined.push_str(&slice.content);
            match slice.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn foreign_cursors_are_rejected() {
        assert!(slice_text("abc", 10, Some("L1")).is_err());
        assert!(slice_text("abc", 10, Some("C99")).is_err());
        assert!(slice_lines(&[], 10, Some("Lx")).is_err());
    }
}
