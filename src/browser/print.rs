//! The page as a PDF document (`Page.printToPDF`): the whole page on A4 or Letter paper, with
//! backgrounds, tagged and with an outline from its headings so PDF readers (ours included)
//! find its structure.

use chromiumoxide::cdp::browser_protocol::page::PrintToPdfParams;
use schemars::JsonSchema;
use serde::Deserialize;

use super::capture::base64_decode;
use super::tab::Tab;
use crate::error::ToolResult;

/// Paper sizes, in inches as `Page.printToPDF` takes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
pub enum Paper {
    #[default]
    #[serde(alias = "a4")]
    A4,
    #[serde(alias = "letter")]
    Letter,
}

impl Paper {
    fn inches(self) -> (f64, f64) {
        match self {
            Paper::A4 => (8.27, 11.69),
            Paper::Letter => (8.5, 11.0),
        }
    }
}

/// How to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printing {
    pub paper: Paper,
    pub landscape: bool,
}

impl Tab {
    /// The page printed as it would be on paper (print media styles apply).
    pub async fn print_pdf(&self, printing: Printing) -> ToolResult<Vec<u8>> {
        let (width, height) = printing.paper.inches();
        let params = PrintToPdfParams {
            landscape: Some(printing.landscape),
            print_background: Some(true),
            paper_width: Some(width),
            paper_height: Some(height),
            generate_tagged_pdf: Some(true),
            generate_document_outline: Some(true),
            ..Default::default()
        };
        let printed = self.cdp("printing", self.page.execute(params)).await?;
        base64_decode(printed.result.data.as_ref())
    }
}
