//! A replay's report as JUnit XML: one test case per step, for CI systems that show them.

use super::{Report, Status};

/// The report as a JUnit `<testsuite>` named `name`.
pub fn junit_xml(report: &Report, name: &str) -> String {
    let failures = report
        .steps
        .iter()
        .filter(|s| s.status == Status::Failed)
        .count();
    let skipped = report
        .steps
        .iter()
        .filter(|s| s.status == Status::Skipped)
        .count();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{:.3}\">\n",
        escape(name),
        report.steps.len(),
        report.elapsed_ms as f64 / 1000.0
    );
    for step in &report.steps {
        xml.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{} {}\" time=\"{:.3}\">",
            escape(name),
            step.seq,
            escape(&step.what),
            step.elapsed_ms as f64 / 1000.0
        ));
        let detail = escape(step.detail.as_deref().unwrap_or_default());
        match step.status {
            Status::Failed => {
                xml.push_str(&format!("<failure message=\"{detail}\"/>"));
                // The attachment form CI systems (Jenkins, GitLab) show as images.
                for picture in &step.pictures {
                    xml.push_str(&format!(
                        "<system-out>[[ATTACHMENT|{}]]</system-out>",
                        escape(picture)
                    ));
                }
            }
            Status::Skipped => xml.push_str("<skipped/>"),
            Status::Healed => xml.push_str(&format!("<system-out>healed: {detail}</system-out>")),
            Status::Passed => {}
        }
        xml.push_str("</testcase>\n");
    }
    xml.push_str("</testsuite>\n");
    xml
}

fn escape(text: &str) -> String {
    crate::web::escape_html(text)
}
