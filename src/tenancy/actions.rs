//! A tenant's rules for agents' actions: the operator's `[actions]`, with what the tenant's own
//! entry adds (a tenant only narrows: it may deny or confirm more, never less).

use std::collections::BTreeSet;

use crate::config::ActionsConfig;

/// What the rules say of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    Allowed,
    /// Refused by the rule naming this action.
    Denied(String),
    /// A person must allow it first, by the rule naming this action.
    Confirm(String),
}

/// The actions denied and those to confirm.
#[derive(Debug, Clone, Default)]
pub struct ActionRules {
    deny: BTreeSet<String>,
    confirm: BTreeSet<String>,
}

impl ActionRules {
    /// The operator's rules.
    pub fn operator(config: &ActionsConfig) -> anyhow::Result<Self> {
        config.check("actions")?;
        Ok(Self {
            deny: config.deny.iter().cloned().collect(),
            confirm: config.confirm.iter().cloned().collect(),
        })
    }

    /// These rules and `tenant`'s.
    pub fn narrowed(&self, tenant: &ActionsConfig, name: &str) -> anyhow::Result<Self> {
        tenant.check(&format!("keys: tenant {name:?}: actions"))?;
        let mut rules = self.clone();
        rules.deny.extend(tenant.deny.iter().cloned());
        rules.confirm.extend(tenant.confirm.iter().cloned());
        Ok(rules)
    }

    /// The ruling on a call that is each of `what` (its action, and `submit_cross_site` when it
    /// submits a form to another site): a denial wins over a confirmation.
    pub fn judge(&self, what: &[&str]) -> Ruling {
        if let Some(name) = what.iter().find(|name| self.deny.contains(**name)) {
            return Ruling::Denied(name.to_string());
        }
        match what.iter().find(|name| self.confirm.contains(**name)) {
            Some(name) => Ruling::Confirm(name.to_string()),
            None => Ruling::Allowed,
        }
    }

    /// Whether any rule names `action`: the caller then has to find out whether the call is it.
    pub fn names(&self, action: &str) -> bool {
        self.deny.contains(action) || self.confirm.contains(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_only_adds_rules_and_denial_wins() {
        let operator = ActionRules::operator(&ActionsConfig {
            deny: vec!["evaluate".into()],
            confirm: vec!["download".into()],
        })
        .unwrap();
        let tenant = operator
            .narrowed(
                &ActionsConfig {
                    deny: vec!["download".into()],
                    confirm: vec!["submit_cross_site".into()],
                },
                "t",
            )
            .unwrap();
        assert_eq!(
            operator.judge(&["download"]),
            Ruling::Confirm("download".into())
        );
        assert_eq!(
            tenant.judge(&["download"]),
            Ruling::Denied("download".into())
        );
        assert_eq!(
            tenant.judge(&["evaluate"]),
            Ruling::Denied("evaluate".into())
        );
        assert_eq!(
            tenant.judge(&["click", "submit_cross_site"]),
            Ruling::Confirm("submit_cross_site".into())
        );
        assert_eq!(tenant.judge(&["click"]), Ruling::Allowed);
        assert!(tenant.names("submit_cross_site") && !operator.names("submit_cross_site"));
    }
}
