//! Where the stores keep their rows: PostgreSQL shared by instances when `--database-url` is
//! set (`postgres`: the pool, migrations, `LISTEN`; `cluster`: the instances and the sessions
//! each holds), else SQLite in the data dir (`sqlite`: one connection for the process). The
//! stores of crawls, conversations, profiles and keys bring their own tables and run them
//! through these two.

pub mod cluster;
pub mod postgres;
pub mod sqlite;

/// The database the stores use, chosen once at start.
#[derive(Clone)]
pub enum Storage {
    /// PostgreSQL, shared by every instance on it.
    Shared(postgres::Database),
    /// `webpilot.db` in the data dir, this instance's own.
    Embedded(sqlite::Sqlite),
}

impl Storage {
    /// PostgreSQL when `database` is given, else the SQLite file in `data_dir`.
    pub fn open(
        database: Option<&postgres::Database>,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<Self> {
        Ok(match database {
            Some(database) => Self::Shared(database.clone()),
            None => Self::Embedded(sqlite::Sqlite::open(&data_dir.join(sqlite::FILE))?),
        })
    }
}

/// A task id binds in a query as its text, in either engine.
impl rusqlite::ToSql for crate::ids::TaskId {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl tokio_postgres::types::ToSql for crate::ids::TaskId {
    fn to_sql(
        &self,
        ty: &tokio_postgres::types::Type,
        out: &mut tokio_util::bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.as_str().to_sql(ty, out)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        <&str as tokio_postgres::types::ToSql>::accepts(ty)
    }

    tokio_postgres::types::to_sql_checked!();
}
