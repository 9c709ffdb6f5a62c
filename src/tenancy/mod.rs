//! Who calls and what is theirs: tenants and their keys (`tenant`), call rates (`rate`), the
//! rules for agents' actions (`actions`), sessions' downloads folders (`downloads`), the
//! server files a tenant may read (`files`), and signed links to one session's live view
//! (`links`). Everything here is resolved once per request and travels as a `Tenant`.

pub mod actions;
pub mod downloads;
pub mod files;
pub mod links;
pub mod rate;
mod tenant;

pub use tenant::*;
