//! An element's identity, recorded when an action acts on it (role, accessible name, the nth of
//! those, stable attributes, the document holding it), and the same element found again in a
//! later page — exactly, by role and name, or as the nearest candidate — for traces and replays.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::frames::Doc;
use super::tab::Tab;
use crate::error::ToolResult;

/// Who an element is, in terms that survive a re-render.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ElementIdentity {
    pub role: String,
    pub name: String,
    /// Its place among the elements of the same role and name in its document (0: the first).
    #[serde(default)]
    pub nth: u32,
    /// Its tag (`button`, `input`, `a`…), lower case.
    #[serde(default)]
    pub tag: String,
    /// `id`, `name`, `data-testid`, `aria-label`, `href`, `type` where set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// The origin and path of the document holding it.
    pub origin: String,
    pub path: String,
    /// It is inside a frame the page cannot script (another origin).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_frame: bool,
}

impl ElementIdentity {
    /// `button "Pay"`, as the element list writes it.
    pub fn label(&self) -> String {
        format!("{} {:?}", self.role, self.name)
    }
}

/// How an element was found again.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// The same stable attributes, role and name (or, recorded without attributes, the same
    /// role, name and position).
    Exact,
    /// The same role and name; its attributes changed.
    RoleName,
    /// The closest by role and name.
    Nearest,
}

/// An element that might be the one looked for.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Candidate {
    pub role: String,
    pub name: String,
    pub score: f64,
}

/// The element found again, with the identity it has now.
#[derive(Debug, Clone)]
pub struct Recognized {
    pub ref_id: u32,
    pub how: Match,
    pub now: Option<ElementIdentity>,
}

#[derive(Deserialize)]
struct Located {
    #[serde(rename = "ref")]
    ref_id: Option<u32>,
    how: Option<Match>,
    #[serde(default)]
    candidates: Vec<Candidate>,
}

impl Tab {
    /// The identity of the element behind `ref_id`; `None` when it is gone.
    pub async fn identify(&self, ref_id: u32) -> Option<ElementIdentity> {
        let doc = self.locate_ref(ref_id).await.ok()?;
        let call = format!("__wp.identify({ref_id})");
        let mut identity: ElementIdentity = self.agent_call(&doc, &call).await.ok()?;
        identity.in_frame = doc != Doc::Top;
        Some(identity)
    }

    /// Finds `identity` on the page as it is now (the element list is taken first, so every
    /// element has a ref); the candidates closest to it when it is not there.
    pub async fn recognize(
        &mut self,
        identity: &ElementIdentity,
    ) -> ToolResult<Result<Recognized, Vec<Candidate>>> {
        self.elements(None).await?;
        let mut docs = vec![Doc::Top];
        if identity.in_frame {
            docs.clear();
            for key in self.refs.frame_keys() {
                if let Some(doc) = self.foreign_doc(&key).await {
                    docs.push(doc);
                }
            }
        }
        let query = serde_json::to_string(identity).unwrap_or_default();
        let mut best: Option<(Match, u32, Doc)> = None;
        let mut candidates = Vec::new();
        for doc in docs {
            let located: Located = self
                .agent_call(&doc, &format!("__wp.locate({query})"))
                .await?;
            candidates.extend(located.candidates);
            if let (Some(ref_id), Some(how)) = (located.ref_id, located.how)
                && best
                    .as_ref()
                    .is_none_or(|(found, ..)| rank(how) < rank(*found))
            {
                best = Some((how, ref_id, doc));
            }
        }
        match best {
            Some((how, ref_id, _)) => Ok(Ok(Recognized {
                ref_id,
                how,
                now: self.identify(ref_id).await,
            })),
            None => {
                candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
                candidates.truncate(3);
                Ok(Err(candidates))
            }
        }
    }
}

fn rank(how: Match) -> u8 {
    match how {
        Match::Exact => 0,
        Match::RoleName => 1,
        Match::Nearest => 2,
    }
}
