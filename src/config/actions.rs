//! `[actions]`: what agents may not do at all (`deny`), and what a person must allow first
//! (`confirm`). Names are `browser_interact` actions plus `submit_cross_site`, a click or an
//! Enter that submits a form to another site. A tenant's own lists only add to these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The names a rule may list: every `browser_interact` action, and `submit_cross_site`.
pub const GUARDED_ACTIONS: [&str; 15] = [
    "click",
    "type",
    "send_keys",
    "select",
    "options",
    "upload",
    "hover",
    "scroll",
    "wait",
    "evaluate",
    "dialog",
    "handoff",
    "download",
    "page_tool",
    "submit_cross_site",
];

/// Agents' actions under the operator's rules.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ActionsConfig {
    /// Actions refused outright (`["evaluate"]`): the call answers FORBIDDEN_ACTION.
    pub deny: Vec<String>,
    /// Actions a person must allow first (`["download", "upload", "evaluate",
    /// "submit_cross_site"]`): the call answers NEEDS_CONFIRMATION with a link for them.
    pub confirm: Vec<String>,
}

impl ActionsConfig {
    pub fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.confirm.is_empty()
    }

    /// Refuses names that are not actions (a typo would otherwise guard nothing).
    pub fn check(&self, section: &str) -> anyhow::Result<()> {
        for (list, names) in [("deny", &self.deny), ("confirm", &self.confirm)] {
            if let Some(unknown) = names
                .iter()
                .find(|name| !GUARDED_ACTIONS.contains(&name.as_str()))
            {
                anyhow::bail!(
                    "{section}.{list}: {unknown:?} is not an action; use one of {}",
                    GUARDED_ACTIONS.join(", ")
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_are_refused() {
        let rules = ActionsConfig {
            deny: vec!["evaluate".into()],
            confirm: vec!["submit_cross_site".into(), "downlaod".into()],
        };
        let error = rules.check("actions").unwrap_err().to_string();
        assert!(error.contains("actions.confirm: \"downlaod\""), "{error}");
        assert!(ActionsConfig::default().check("actions").is_ok());
    }
}
