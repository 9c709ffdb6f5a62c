//! What one document may yield, whatever its bytes claim: `MAX_CELLS` cells of tables (a sheet
//! counted as it is laid out, its rows times its widest row, since every row is padded to that
//! width) and `MAX_TEXT` bytes of text. Repeated rows and columns, a chapter listed many times
//! and a CSV of commas all draw on the same budget; past it, reading stops and the document's
//! info says where (`cut`).

/// Most cells a document's tables yield (rows times the widest row, per table).
pub(super) const MAX_CELLS: usize = 1_000_000;
/// Most bytes of text (UTF-8) a document yields: about 20 million characters of most languages.
pub(super) const MAX_TEXT: usize = 20_000_000;

/// A table's shape so far: its rows and its widest row.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Grid {
    pub rows: usize,
    pub width: usize,
}

impl Grid {
    fn area(self) -> usize {
        self.rows.saturating_mul(self.width.max(1))
    }
}

/// What is left of a document's cells and text, and where it was cut once either ran out.
#[derive(Debug)]
pub(super) struct Budget {
    cells: usize,
    text: usize,
    /// What the budget started with, for the note.
    limits: (usize, usize),
    cut: Option<String>,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(MAX_CELLS, MAX_TEXT)
    }
}

impl Budget {
    pub(super) fn new(cells: usize, text: usize) -> Self {
        Self {
            cells,
            text,
            limits: (cells, text),
            cut: None,
        }
    }

    /// Whether reading stopped.
    pub(super) fn is_cut(&self) -> bool {
        self.cut.is_some()
    }

    /// Where reading stopped, if it did.
    pub(super) fn into_cut(self) -> Option<String> {
        self.cut
    }

    /// Bytes of text left.
    pub(super) fn text_left(&self) -> usize {
        if self.is_cut() { 0 } else { self.text }
    }

    /// Cells left.
    pub(super) fn cells_left(&self) -> usize {
        if self.is_cut() { 0 } else { self.cells }
    }

    /// Records that reading stopped `at` because the cells (else the text) ran out; the first
    /// cut is the one kept, and nothing is taken after it.
    pub(super) fn stop(&mut self, cells: bool, at: impl FnOnce() -> String) {
        if self.cut.is_none() {
            let limit = if cells {
                format!("{} cells", self.limits.0)
            } else {
                format!("{} bytes of text", self.limits.1)
            };
            self.cut = Some(format!("at {}: past the {limit} a read takes", at()));
        }
    }

    /// Takes `bytes` of text when they are left; else stops `at` and answers false.
    pub(super) fn text(&mut self, bytes: usize, at: impl FnOnce() -> String) -> bool {
        if bytes <= self.text_left() {
            self.text -= bytes;
            return true;
        }
        self.stop(false, at);
        false
    }

    /// How many of `copies` rows of `width` cells and `text` bytes each fit a table shaped
    /// `grid` (a wider row widens every row before it); takes them, grows `grid`, and when not
    /// all fit stops at `at(n)`, `n` the number of the first row left out.
    pub(super) fn rows(
        &mut self,
        grid: &mut Grid,
        (width, text): (usize, usize),
        copies: usize,
        at: impl FnOnce(usize) -> String,
    ) -> usize {
        if copies == 0 {
            return 0;
        }
        let wider = Grid {
            rows: grid.rows,
            width: grid.width.max(width),
        };
        let by_cells = self
            .cells_left()
            .checked_sub(wider.area() - grid.area())
            .map_or(0, |left| left / wider.width.max(1));
        let by_text = self.text_left().checked_div(text).unwrap_or(usize::MAX);
        let taken = copies.min(by_cells).min(by_text);
        if taken > 0 {
            let grown = Grid {
                rows: wider.rows + taken,
                width: wider.width,
            };
            self.cells -= grown.area() - grid.area();
            self.text -= text * taken;
            *grid = grown;
        }
        if taken < copies {
            let first_left_out = grid.rows + 1;
            self.stop(by_cells <= by_text, || at(first_left_out));
        }
        taken
    }
}

/// `text` cut to at most `max` bytes, at a character boundary and, where there is one, after the
/// last `>` or line break before it (no tag or Markdown line left half-written).
pub(super) fn cut_text(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(at) = text[..end].rfind(['>', '\n']) {
        end = at + 1;
    }
    text.truncate(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_fit_by_area_and_the_cut_names_the_place() {
        let mut budget = Budget::new(100, 1_000);
        let mut grid = Grid::default();
        // Ten rows of five cells: 50 cells.
        assert_eq!(budget.rows(&mut grid, (5, 10), 10, |_| "x".into()), 10);
        assert_eq!(budget.cells_left(), 50);
        // A row of ten cells widens the ten before it (50 more) and itself does not fit.
        let at = |row| format!("row {row}");
        assert_eq!(budget.rows(&mut grid, (10, 10), 1_000, at), 0);
        assert!(budget.is_cut());
        assert_eq!(budget.cells_left(), 0);
        let cut = budget.into_cut().unwrap();
        assert_eq!(cut, "at row 11: past the 100 cells a read takes");
    }

    #[test]
    fn a_billion_repeated_rows_take_what_is_left() {
        let mut budget = Budget::default();
        let mut grid = Grid::default();
        let at = |row| format!("row {row}");
        let taken = budget.rows(&mut grid, (1_000, 5_000), 1_000_000_000, at);
        assert_eq!(taken, 1_000);
        assert_eq!(
            budget.into_cut().unwrap(),
            "at row 1001: past the 1000000 cells a read takes"
        );
        assert!(grid.rows * grid.width <= MAX_CELLS);
    }

    #[test]
    fn text_runs_out_and_stays_out() {
        let mut budget = Budget::new(10, 10);
        assert!(budget.text(6, || "a".into()));
        assert!(!budget.text(6, || "b".into()));
        assert!(!budget.text(1, || "c".into()), "once cut, nothing more");
        assert_eq!(
            budget.into_cut().unwrap(),
            "at b: past the 10 bytes of text a read takes"
        );
    }

    #[test]
    fn text_is_cut_after_a_tag_or_line() {
        let mut html = "<p>one</p><p>twoé</p>".to_string();
        cut_text(&mut html, 15);
        assert_eq!(html, "<p>one</p><p>");
        let mut plain = "é".repeat(10);
        cut_text(&mut plain, 5);
        assert_eq!(plain, "éé");
    }
}
