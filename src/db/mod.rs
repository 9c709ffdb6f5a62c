//! The shared database, when `--database-url` is set: the PostgreSQL pool with its migrations
//! and `LISTEN` (`postgres`), and the instances sharing it with the sessions each holds
//! (`cluster`). The stores of crawls, conversations, profiles and keys run their migrations
//! through `postgres::Database::migrate`.

pub mod cluster;
pub mod postgres;
