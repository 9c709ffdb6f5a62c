//! The shared engine: crawl tasks in PostgreSQL, worked on by every instance. An item is claimed
//! with `FOR UPDATE SKIP LOCKED` together with one of its host's slots (`crawl_host_slots`: as
//! many rows per host as `per_host`) and one of its task's (as many as its `parallel`), all under
//! the same lease, so the host limit and the task's parallelism hold across the cluster and a
//! dead instance's slots free themselves when its leases end. Claim and finish
//! are one statement each; finish also sends the progress event with `NOTIFY`.

use async_trait::async_trait;

use super::{
    Claim, CrawlStore, ItemRow, Lease, Recorded, StoreResult, TaskRow, outcome_columns,
    stored_outcome, stored_task,
};
use crate::crawl::TaskStatus;
use crate::db::postgres::{Database, Migration};
use crate::error::ToolError;
use crate::pages::Page;

/// The channel every instance listens on for crawl events.
pub const CHANNEL: &str = "webpilot_crawl";

const MIGRATIONS: [Migration; 2] = [
    (
        1,
        "CREATE TABLE crawl_tasks (
         id TEXT PRIMARY KEY,
         tenant TEXT NOT NULL DEFAULT '',
         created_ms BIGINT NOT NULL,
         status TEXT NOT NULL,
         options TEXT NOT NULL,
         total INTEGER NOT NULL,
         finished INTEGER NOT NULL DEFAULT 0,
         failed INTEGER NOT NULL DEFAULT 0
     );
     CREATE INDEX crawl_tasks_by_tenant ON crawl_tasks (tenant, created_ms DESC);
     CREATE INDEX crawl_tasks_unfinished ON crawl_tasks (created_ms)
         WHERE status IN ('pending', 'running');
     CREATE TABLE crawl_items (
         task_id TEXT NOT NULL REFERENCES crawl_tasks (id) ON DELETE CASCADE,
         idx INTEGER NOT NULL,
         url TEXT NOT NULL,
         host TEXT NOT NULL,
         state TEXT NOT NULL,
         result TEXT,
         error TEXT,
         finished_seq INTEGER,
         claimed_by TEXT,
         lease_until TIMESTAMPTZ,
         PRIMARY KEY (task_id, idx)
     );
     CREATE INDEX crawl_items_pending ON crawl_items (task_id, idx) WHERE state = 'pending';
     CREATE TABLE crawl_host_slots (
         host TEXT NOT NULL,
         slot INTEGER NOT NULL,
         claimed_by TEXT,
         lease_until TIMESTAMPTZ,
         task_id TEXT,
         idx INTEGER,
         PRIMARY KEY (host, slot)
     );
     CREATE INDEX crawl_host_slots_by_item ON crawl_host_slots (task_id, idx);",
    ),
    (
        // A re-crawl looks up the tenant's earlier reads of a URL.
        2,
        "CREATE INDEX crawl_items_by_url ON crawl_items (url);",
    ),
];

const TASK_COLUMNS: &str = "id, tenant, created_ms, status, options, total";

pub struct PostgresStore {
    database: Database,
}

impl PostgresStore {
    /// Migrates the database to this version's schema.
    pub async fn open(database: Database) -> anyhow::Result<Self> {
        database.migrate("crawl", &MIGRATIONS).await?;
        Ok(Self { database })
    }
}

fn task_row(row: &tokio_postgres::Row) -> TaskRow {
    stored_task(
        row.get(0),
        row.get(1),
        row.get(2),
        row.get::<_, &str>(3),
        row.get::<_, &str>(4),
        i64::from(row.get::<_, i32>(5)),
    )
}

fn item_row(row: &tokio_postgres::Row) -> ItemRow {
    ItemRow {
        index: row.get::<_, i32>(0).max(0) as usize,
        url: row.get(1),
        outcome: stored_outcome(row.get(2), row.get(3)),
    }
}

/// The slots of task `id`: rows of the host slots under a name no host has (hosts have no
/// `/`), one per unit of the task's `parallel`, so that it holds across instances too.
fn task_slots(id: &str) -> String {
    format!("task/{id}")
}

fn lease_ms(lease: &Lease) -> i64 {
    lease.length.as_millis() as i64
}

#[async_trait]
impl CrawlStore for PostgresStore {
    async fn create(
        &self,
        task: &TaskRow,
        urls: &[(String, String)],
        per_host: usize,
    ) -> StoreResult<()> {
        let options = serde_json::to_string(&task.options).unwrap_or_default();
        let (links, hosts): (Vec<&str>, Vec<&str>) = urls
            .iter()
            .map(|(url, host)| (url.as_str(), host.as_str()))
            .unzip();
        let mut client = self.database.client().await?;
        let transaction = client.transaction().await?;
        transaction
            .execute(
                "INSERT INTO crawl_tasks (id, tenant, created_ms, status, options, total)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &task.id,
                    &task.tenant.stored(),
                    &task.created_ms,
                    &task.status.as_str(),
                    &options,
                    &(urls.len() as i32),
                ],
            )
            .await?;
        transaction
            .execute(
                "INSERT INTO crawl_items (task_id, idx, url, host, state)
                 SELECT $1, (n - 1)::int, url, host, 'pending'
                 FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u (url, host, n)",
                &[&task.id, &links, &hosts],
            )
            .await?;
        transaction
            .execute(
                "INSERT INTO crawl_host_slots (host, slot)
                 SELECT host, slot FROM (SELECT DISTINCT unnest($1::text[]) AS host) AS h,
                        generate_series(0, $2 - 1) AS slot
                 ON CONFLICT DO NOTHING",
                &[&hosts, &(per_host as i32)],
            )
            .await?;
        transaction
            .execute(
                "INSERT INTO crawl_host_slots (host, slot)
                 SELECT $1, generate_series(0, $2 - 1) ON CONFLICT DO NOTHING",
                &[
                    &task_slots(&task.id),
                    &(task.options.parallel.max(1) as i32),
                ],
            )
            .await?;
        // Every instance starts working on it.
        let created = serde_json::json!({ "created": task.id }).to_string();
        transaction
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &created])
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn set_status(&self, id: &str, status: TaskStatus) -> StoreResult<bool> {
        let changed = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH changed AS (
                     UPDATE crawl_tasks SET status = $2
                     WHERE id = $1 AND status NOT IN ('completed', 'failed') AND status <> $2
                     RETURNING id
                 ), freed AS (
                     DELETE FROM crawl_host_slots
                     WHERE host = $3 AND $2 IN ('completed', 'failed')
                       AND EXISTS (SELECT 1 FROM changed)
                 )
                 SELECT 1 FROM changed",
                &[&id, &status.as_str(), &task_slots(id)],
            )
            .await?;
        Ok(changed.is_some())
    }

    async fn task(&self, id: &str) -> StoreResult<Option<TaskRow>> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM crawl_tasks WHERE id = $1");
        let row = self
            .database
            .client()
            .await?
            .query_opt(&sql, &[&id])
            .await?;
        Ok(row.as_ref().map(task_row))
    }

    async fn tasks(
        &self,
        tenant: &crate::ids::TenantName,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> StoreResult<Vec<TaskRow>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM crawl_tasks
             WHERE tenant = $1 AND ($2::text IS NULL OR status = $2)
             ORDER BY created_ms DESC, id LIMIT $3"
        );
        let status = status.map(TaskStatus::as_str);
        let rows = self
            .database
            .client()
            .await?
            .query(&sql, &[&tenant.stored(), &status, &(limit as i64)])
            .await?;
        Ok(rows.iter().map(task_row).collect())
    }

    async fn unfinished(&self) -> StoreResult<Vec<String>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                "SELECT id FROM crawl_tasks WHERE status IN ('pending', 'running')
                 ORDER BY created_ms",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn claim(&self, id: &str, lease: &Lease) -> StoreResult<Claim> {
        // The item, a free slot of its host and one of its task are locked together, or nothing
        // is claimed;
        // rows others are claiming right now are skipped, not waited for.
        let claimed = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH item AS (
                     SELECT task_id, idx, host FROM crawl_items
                     WHERE task_id = $1 AND state = 'pending'
                       AND (lease_until IS NULL OR lease_until < now())
                     ORDER BY idx LIMIT 1 FOR UPDATE SKIP LOCKED
                 ), slot AS (
                     SELECT s.host, s.slot FROM crawl_host_slots s JOIN item ON s.host = item.host
                     WHERE s.lease_until IS NULL OR s.lease_until < now()
                     ORDER BY s.slot LIMIT 1 FOR UPDATE OF s SKIP LOCKED
                 ), task_slot AS (
                     SELECT s.host, s.slot FROM crawl_host_slots s
                     WHERE s.host = $4 AND (s.lease_until IS NULL OR s.lease_until < now())
                     ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED
                 ), held AS (
                     UPDATE crawl_host_slots s
                     SET claimed_by = $2, lease_until = now() + $3 * interval '1 millisecond',
                         task_id = item.task_id, idx = item.idx
                     FROM slot, task_slot, item
                     WHERE (s.host = slot.host AND s.slot = slot.slot)
                        OR (s.host = task_slot.host AND s.slot = task_slot.slot)
                     RETURNING s.slot
                 ), claimed AS (
                     UPDATE crawl_items i
                     SET claimed_by = $2, lease_until = now() + $3 * interval '1 millisecond'
                     FROM item WHERE i.task_id = item.task_id AND i.idx = item.idx
                       AND EXISTS (SELECT 1 FROM held)
                     RETURNING i.idx, i.url
                 )
                 SELECT idx, url FROM claimed
                 UNION ALL
                 SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM claimed) AND EXISTS (
                     SELECT 1 FROM crawl_items WHERE task_id = $1 AND state = 'pending')",
                &[
                    &id,
                    &lease.owner,
                    &(lease_ms(lease) as f64),
                    &task_slots(id),
                ],
            )
            .await?;
        // One statement whatever it finds: an item, a row of nulls (pending items, none free),
        // or no row (nothing pending).
        Ok(match claimed {
            Some(row) => match (
                row.get::<_, Option<i32>>(0),
                row.get::<_, Option<String>>(1),
            ) {
                (Some(index), Some(url)) => Claim::Item {
                    index: index.max(0) as usize,
                    url,
                },
                _ => Claim::Busy,
            },
            None => Claim::Empty,
        })
    }

    async fn renew(&self, id: &str, index: usize, lease: &Lease) -> StoreResult<bool> {
        let renewed = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH item AS (
                     UPDATE crawl_items SET lease_until = now() + $4 * interval '1 millisecond'
                     WHERE task_id = $1 AND idx = $2 AND claimed_by = $3 AND state = 'pending'
                     RETURNING task_id
                 ), slot AS (
                     UPDATE crawl_host_slots SET lease_until = now() + $4 * interval '1 millisecond'
                     WHERE task_id = $1 AND idx = $2 AND claimed_by = $3
                 )
                 SELECT 1 FROM item",
                &[
                    &id,
                    &(index as i32),
                    &lease.owner,
                    &(lease_ms(lease) as f64),
                ],
            )
            .await?;
        Ok(renewed.is_some())
    }

    async fn release(&self, id: &str, lease: &Lease) -> StoreResult<()> {
        self.database
            .client()
            .await?
            .execute(
                "WITH item AS (
                     UPDATE crawl_items SET claimed_by = NULL, lease_until = NULL
                     WHERE task_id = $1 AND claimed_by = $2 AND state = 'pending'
                 )
                 UPDATE crawl_host_slots SET claimed_by = NULL, lease_until = NULL,
                     task_id = NULL, idx = NULL
                 WHERE task_id = $1 AND claimed_by = $2",
                &[&id, &lease.owner],
            )
            .await?;
        Ok(())
    }

    async fn finish(
        &self,
        id: &str,
        index: usize,
        outcome: &Result<Page, ToolError>,
        lease: &Lease,
        announcement: &str,
    ) -> StoreResult<Option<Recorded>> {
        let (state, result, error) = outcome_columns(outcome);
        let failed = i32::from(outcome.is_err());
        // Counting on the task's row orders finishes: progress numbers go out in commit order.
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH task AS (
                     UPDATE crawl_tasks SET finished = finished + 1, failed = failed + $7
                     WHERE id = $1 AND EXISTS (
                         SELECT 1 FROM crawl_items WHERE task_id = $1 AND idx = $2
                           AND state = 'pending' AND claimed_by = $6)
                     RETURNING finished
                 ), item AS (
                     UPDATE crawl_items SET state = $3, result = $4, error = $5,
                         claimed_by = NULL, lease_until = NULL, finished_seq = task.finished
                     FROM task WHERE task_id = $1 AND idx = $2
                 ), slot AS (
                     UPDATE crawl_host_slots SET claimed_by = NULL, lease_until = NULL,
                         task_id = NULL, idx = NULL
                     WHERE task_id = $1 AND idx = $2 AND claimed_by = $6
                 )
                 SELECT finished, pg_notify($8, jsonb_set($9::text::jsonb, '{progress}', to_jsonb(finished))::text)
                 FROM task",
                &[
                    &id,
                    &(index as i32),
                    &state,
                    &result,
                    &error,
                    &lease.owner,
                    &failed,
                    &CHANNEL,
                    &announcement,
                ],
            )
            .await?;
        Ok(row.map(|row| Recorded {
            progress: row.get::<_, i32>(0).max(0) as usize,
        }))
    }

    async fn last_read(
        &self,
        tenant: &crate::ids::TenantName,
        url: &str,
    ) -> StoreResult<Option<Page>> {
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "SELECT i.result FROM crawl_items i JOIN crawl_tasks t ON t.id = i.task_id
                 WHERE t.tenant = $1 AND i.url = $2 AND i.result IS NOT NULL
                   AND (i.result LIKE '%\"etag\"%' OR i.result LIKE '%\"last_modified\"%')
                 ORDER BY t.created_ms DESC, i.finished_seq DESC LIMIT 1",
                &[&tenant.stored(), &url],
            )
            .await?;
        Ok(super::with_validators(row.and_then(|row| row.get(0))))
    }

    async fn counts(&self, id: &str) -> StoreResult<(usize, usize)> {
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "SELECT finished, failed FROM crawl_tasks WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(row.map_or((0, 0), |row| {
            (
                row.get::<_, i32>(0).max(0) as usize,
                row.get::<_, i32>(1).max(0) as usize,
            )
        }))
    }

    async fn finished(&self, id: &str) -> StoreResult<Vec<ItemRow>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                "SELECT idx, url, result, error FROM crawl_items
                 WHERE task_id = $1 AND state <> 'pending' ORDER BY finished_seq",
                &[&id],
            )
            .await?;
        Ok(rows.iter().map(item_row).collect())
    }

    async fn finished_page(
        &self,
        id: &str,
        from: usize,
        max_chars: usize,
    ) -> StoreResult<(Vec<ItemRow>, Option<usize>)> {
        // Costs first, then only the rows that fit.
        let client = self.database.client().await?;
        let costs = client
            .query(
                "SELECT idx, (length(url) + length(COALESCE(result, error, '')))::bigint
                 FROM crawl_items
                 WHERE task_id = $1 AND state <> 'pending' AND idx >= $2 ORDER BY idx",
                &[&id, &(from as i32)],
            )
            .await?;
        let (mut last, mut used, mut next) = (None, 0usize, None);
        for row in &costs {
            let (index, cost) = (row.get::<_, i32>(0), row.get::<_, i64>(1).max(0) as usize);
            if last.is_some() && used + cost > max_chars {
                next = Some(index.max(0) as usize);
                break;
            }
            used += cost;
            last = Some(index);
        }
        let Some(last) = last else {
            return Ok((Vec::new(), None));
        };
        let rows = client
            .query(
                "SELECT idx, url, result, error FROM crawl_items
                 WHERE task_id = $1 AND state <> 'pending' AND idx >= $2 AND idx <= $3
                 ORDER BY idx",
                &[&id, &(from as i32), &last],
            )
            .await?;
        Ok((rows.iter().map(item_row).collect(), next))
    }

    fn shared(&self) -> bool {
        true
    }

    async fn publish(&self, payload: &str) -> StoreResult<()> {
        self.database
            .client()
            .await?
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            .await?;
        Ok(())
    }

    fn round_trips(&self) -> Option<u64> {
        Some(self.database.round_trips())
    }
}
