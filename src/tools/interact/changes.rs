//! What an action reports of the element list: only what changed, or the list itself when
//! that is shorter.

use super::{ADDED_ELEMENTS_TOKENS, InteractOutput};
use crate::browser::{ChangesIn, ElementChanges};
use crate::error::ToolResult;
use crate::pages::paging::slice_lines;

impl InteractOutput {
    /// Only what changed in the element list: added and changed lines, counts of the rest,
    /// each only when not zero (and the unchanged count only beside a change and not after a
    /// scroll, the added count only when the lines were cut). The line of
    /// element `said` (whose `value` the result already gives) is left out of `changed`.
    pub(super) fn report_changes(
        &mut self,
        changes: &ElementChanges,
        scope: ChangesIn,
        said: Option<u32>,
    ) -> ToolResult<()> {
        let said = said.map(|id| format!("[{id}] "));
        let changed: Vec<String> = changes
            .changed
            .iter()
            .filter(|line| said.as_ref().is_none_or(|prefix| !line.starts_with(prefix)))
            .cloned()
            .collect();
        if relisting_is_shorter(changes, &changed) {
            let head = format!(
                "re-rendered: {} in view, {} off-screen",
                changes.in_view.len(),
                changes.offscreen
            );
            let lines: Vec<String> = std::iter::once(head)
                .chain(changes.in_view.iter().cloned())
                .collect();
            self.relisted = Some(slice_lines(&lines, ADDED_ELEMENTS_TOKENS, None)?.content);
            return Ok(());
        }
        let counted = |n: usize| (n > 0).then_some(n);
        self.elements_removed = counted(changes.removed.len());
        self.elements_offscreen_added = counted(changes.offscreen_added);
        let any = !changes.added.is_empty() || !changes.removed.is_empty() || !changed.is_empty();
        // After a scroll what stayed is not news: what came into view is.
        self.elements_unchanged =
            counted(changes.unchanged).filter(|_| any && scope == ChangesIn::Page);
        if !changes.added.is_empty() {
            let slice = slice_lines(&changes.added, ADDED_ELEMENTS_TOKENS, None)?;
            // The count says what the lines do not: how many there were past the ones shown.
            self.elements_added = slice.truncated.then_some(changes.added.len());
            self.added = Some(slice.content);
        }
        if !changed.is_empty() {
            let slice = slice_lines(&changed, ADDED_ELEMENTS_TOKENS, None)?;
            self.changed = Some(slice.content);
        }
        Ok(())
    }
}

/// Whether the elements in view, listed whole, cost fewer characters than the lines of what
/// was added and `changed` (a re-rendered list, whose every row would be news).
fn relisting_is_shorter(changes: &ElementChanges, changed: &[String]) -> bool {
    let cost = |lines: &[String]| lines.iter().map(|line| line.len() + 1).sum::<usize>();
    // What the changes cost beyond their lines: the counts' fields.
    const COUNTS: usize = 60;
    let told = cost(&changes.added) + cost(changed) + COUNTS;
    !changes.added.is_empty() && cost(&changes.in_view) + COUNTS < told
}
