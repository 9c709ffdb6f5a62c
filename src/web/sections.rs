//! Splitting Markdown into heading-led sections and ranking them against a query, so an agent
//! can read only the parts of a long page that matter.

use std::collections::{HashMap, HashSet};

/// One heading-led part of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Position in the document (0-based).
    pub index: usize,
    pub text: String,
    pub score: f64,
}

/// Splits at Markdown headings; text before the first heading is its own section.
pub fn split(markdown: &str) -> Vec<String> {
    let mut sections: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in markdown.lines() {
        if line.starts_with('#') && !current.trim().is_empty() {
            sections.push(std::mem::take(&mut current).trim().to_string());
        }
        current.push_str(line);
        current.push('\n');
    }
    if !current.trim().is_empty() {
        sections.push(current.trim().to_string());
    }
    sections
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
        .map(str::to_lowercase)
        .collect()
}

/// Sections ranked by BM25 against `query`, best first; sections sharing no word are left out.
pub fn rank(markdown: &str, query: &str) -> Vec<Section> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let sections = split(markdown);
    let terms: HashSet<String> = words(query).into_iter().collect();
    if sections.is_empty() || terms.is_empty() {
        return Vec::new();
    }
    let tokenised: Vec<Vec<String>> = sections.iter().map(|s| words(s)).collect();
    let average = tokenised.iter().map(Vec::len).sum::<usize>() as f64 / sections.len() as f64;
    let n = sections.len() as f64;
    let document_frequency =
        |term: &String| tokenised.iter().filter(|t| t.contains(term)).count() as f64;
    let idf: HashMap<&String, f64> = terms
        .iter()
        .map(|t| {
            let df = document_frequency(t);
            (t, ((n - df + 0.5) / (df + 0.5) + 1.0).ln())
        })
        .collect();
    let mut ranked: Vec<Section> = sections
        .into_iter()
        .zip(&tokenised)
        .enumerate()
        .filter_map(|(index, (text, tokens))| {
            let length = tokens.len() as f64;
            let score: f64 = terms
                .iter()
                .map(|term| {
                    let tf = tokens.iter().filter(|w| *w == term).count() as f64;
                    idf[term] * tf * (K1 + 1.0)
                        / (tf + K1 * (1.0 - B + B * length / average.max(1.0)))
                })
                .sum();
            (score > 0.0).then_some(Section { index, text, score })
        })
        .collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_about_the_query_ranks_first() {
        let doc = "# Intro\nWelcome to the shop.\n## Shipping\nWe ship parcels worldwide; shipping takes 3 days.\n## Returns\nReturn items within 30 days.";
        let ranked = rank(doc, "how long does shipping take");
        assert_eq!(ranked[0].index, 1);
        assert!(ranked[0].text.starts_with("## Shipping"));
        assert!(rank(doc, "zebra").is_empty());
    }
}
