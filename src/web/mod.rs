//! The browserless side: turning HTML into Markdown and picking the sections of a document that
//! answer a query. No CDP here.

pub mod markdown;
pub mod sections;
