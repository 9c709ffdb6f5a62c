//! The shared engine: crawl tasks in PostgreSQL, worked on by every instance. An item is claimed
//! with `FOR UPDATE SKIP LOCKED` together with one of its host's slots (`crawl_host_slots`: as
//! many rows per host as `per_host`) and one of its task's (as many as its `parallel`), all under
//! the same lease, so the host limit and the task's parallelism hold across the cluster and a
//! dead instance's slots free themselves when its leases end. Claim and finish
//! are one statement each; finish also sends the progress event with `NOTIFY`.

use async_trait::async_trait;

use super::{
    Claim, Counts, CrawlStore, ItemRow, Lease, Recorded, StoreResult, TaskRow, found_columns,
    host_of, outcome_columns, stored_outcome, stored_task,
};
use crate::crawl::{Found, ItemOutcome, TaskStatus};
use crate::db::postgres::{Database, Migration};
use crate::ids::{TaskId, TenantName};
use crate::pages::Page;

/// The channel every instance listens on for crawl events.
pub const CHANNEL: &str = "webpilot_crawl";

const MIGRATIONS: [Migration; 4] = [
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
    (
        // A site crawl reads each page once: one item per normalised URL.
        3,
        "ALTER TABLE crawl_items ADD COLUMN key TEXT,
             ADD COLUMN depth INTEGER NOT NULL DEFAULT 0, ADD COLUMN found_from TEXT;
         CREATE UNIQUE INDEX crawl_items_by_key ON crawl_items (task_id, key)
             WHERE key IS NOT NULL;",
    ),
    (
        // Counts kept on the task's row: adding the pages a page links to does not count the
        // task's items.
        4,
        "ALTER TABLE crawl_tasks ADD COLUMN items INTEGER NOT NULL DEFAULT 0,
             ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
         UPDATE crawl_tasks t SET
             items = (SELECT COUNT(*) FROM crawl_items i WHERE i.task_id = t.id),
             queued = (SELECT COUNT(*) FROM crawl_items i
                       WHERE i.task_id = t.id AND i.state <> 'skipped');
         CREATE INDEX crawl_items_by_state ON crawl_items (task_id, state) INCLUDE (finished_seq);",
    ),
];

/// The columns an item is read back with.
const ITEM_COLUMNS: &str = "idx, url, state, result, error, depth, found_from";

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

    /// Task `id`; with a `tenant`, only if it is that tenant's (the owner in the query).
    async fn one_task(&self, id: &TaskId, tenant: Option<&str>) -> StoreResult<Option<TaskRow>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM crawl_tasks WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)"
        );
        let key: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&id, &tenant];
        let client = self.database.client().await?;
        Ok(client.query_opt(&sql, &key).await?.as_ref().map(task_row))
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
        outcome: stored_outcome(row.get(2), row.get(3), row.get(4)),
        depth: row.get::<_, i32>(5).max(0) as u32,
        from: row.get(6),
    }
}

/// Found URLs as the columns `unnest` turns into rows.
#[derive(Default)]
struct FoundRows<'a> {
    urls: Vec<&'a str>,
    hosts: Vec<String>,
    keys: Vec<Option<&'a str>>,
    depths: Vec<i32>,
    from: Vec<Option<&'a str>>,
    states: Vec<&'static str>,
    errors: Vec<Option<String>>,
    results: Vec<Option<String>>,
}

/// Inserts found URLs (none of them known to the task yet) after the task's last, those that
/// take one of its `max_pages` while there is room, and their hosts' slots, and keeps the
/// task's counts. The caller holds the task's row.
async fn insert_found(
    transaction: &tokio_postgres::Transaction<'_>,
    id: &TaskId,
    found: &[&Found],
    max_pages: usize,
    per_host: usize,
) -> StoreResult<()> {
    let counts = transaction
        .query_opt(
            "SELECT items, queued FROM crawl_tasks WHERE id = $1",
            &[&id],
        )
        .await?;
    let (next, queued) = counts.map_or((0, 0), |row| (row.get::<_, i32>(0), row.get::<_, i32>(1)));
    let mut room = max_pages.saturating_sub(queued.max(0) as usize);
    let (mut taking, mut pending) = (0i32, 0i32);
    let mut rows = FoundRows::default();
    for item in found {
        let (state, result, skip) = found_columns(item, room > 0);
        room -= usize::from(state != "skipped");
        taking += i32::from(state != "skipped");
        pending += i32::from(state == "pending");
        rows.urls.push(&item.url);
        rows.hosts.push(host_of(&item.url));
        rows.keys.push(item.key.as_deref());
        rows.depths.push(item.depth as i32);
        rows.from.push(item.from.as_deref());
        rows.states.push(state);
        rows.errors.push(skip);
        rows.results.push(result);
    }
    transaction
        .execute(
            "INSERT INTO crawl_items
                 (task_id, idx, url, host, key, depth, found_from, state, error, result)
             SELECT $1, $2 + (n - 1)::int, url, host, key, depth, found_from, state, error, result
             FROM unnest($3::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::text[],
                         $9::text[], $10::text[])
                  WITH ORDINALITY AS u (url, host, key, depth, found_from, state, error, result, n)",
            &[
                &id,
                &next,
                &rows.urls,
                &rows.hosts,
                &rows.keys,
                &rows.depths,
                &rows.from,
                &rows.states,
                &rows.errors,
                &rows.results,
            ],
        )
        .await?;
    transaction
        .execute(
            "INSERT INTO crawl_host_slots (host, slot)
             SELECT host, slot FROM (SELECT DISTINCT unnest($1::text[]) AS host) AS h,
                    generate_series(0, $2 - 1) AS slot
             ON CONFLICT DO NOTHING",
            &[&rows.hosts, &(per_host as i32)],
        )
        .await?;
    transaction
        .execute(
            "UPDATE crawl_tasks SET items = items + $2, queued = queued + $3, total = total + $4
             WHERE id = $1",
            &[&id, &(found.len() as i32), &taking, &pending],
        )
        .await?;
    Ok(())
}

/// The slots of task `id`: rows of the host slots under a name no host has (hosts have no
/// `/`), one per unit of the task's `parallel`, so that it holds across instances too.
fn task_slots(id: &TaskId) -> String {
    format!("task/{id}")
}

fn lease_ms(lease: &Lease) -> i64 {
    lease.length.as_millis() as i64
}

#[async_trait]
impl CrawlStore for PostgresStore {
    async fn create(&self, task: &TaskRow, seeds: &[Found], per_host: usize) -> StoreResult<()> {
        let options = serde_json::to_string(&task.options).unwrap_or_default();
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
                    &0i32,
                ],
            )
            .await?;
        let seeds: Vec<&Found> = seeds.iter().collect();
        insert_found(&transaction, &task.id, &seeds, usize::MAX, per_host).await?;
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

    async fn add(
        &self,
        id: &TaskId,
        found: &[Found],
        max_pages: usize,
        per_host: usize,
    ) -> StoreResult<Vec<bool>> {
        let mut client = self.database.client().await?;
        let transaction = client.transaction().await?;
        // The task's row orders the additions: indices and the page count stay exact.
        transaction
            .execute("SELECT 1 FROM crawl_tasks WHERE id = $1 FOR UPDATE", &[&id])
            .await?;
        let keys: Vec<Option<&str>> = found.iter().map(|f| f.key.as_deref()).collect();
        let known = transaction
            .query(
                "SELECT key FROM crawl_items WHERE task_id = $1 AND key = ANY($2::text[])",
                &[&id, &keys],
            )
            .await?;
        let mut seen: std::collections::HashSet<String> =
            known.iter().map(|row| row.get(0)).collect();
        let added: Vec<bool> = found
            .iter()
            .map(|f| f.key.as_ref().is_none_or(|key| seen.insert(key.clone())))
            .collect();
        let new: Vec<&Found> = found
            .iter()
            .zip(&added)
            .filter(|(_, a)| **a)
            .map(|(f, _)| f)
            .collect();
        insert_found(&transaction, id, &new, max_pages, per_host).await?;
        transaction.commit().await?;
        Ok(added)
    }

    async fn set_status(&self, id: &TaskId, status: TaskStatus) -> StoreResult<bool> {
        let changed = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH changed AS (
                     UPDATE crawl_tasks SET status = $2
                     WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled')
                       AND status <> $2
                     RETURNING id
                 ), freed AS (
                     DELETE FROM crawl_host_slots
                     WHERE host = $3 AND $2 IN ('completed', 'failed', 'cancelled')
                       AND EXISTS (SELECT 1 FROM changed)
                 )
                 SELECT 1 FROM changed",
                &[&id, &status.as_str(), &task_slots(id)],
            )
            .await?;
        Ok(changed.is_some())
    }

    async fn cancel(&self, id: &TaskId) -> StoreResult<bool> {
        // One statement: the status, the items and the slots change together or not at all.
        // The task's own slots go; the host slots its items held are let go (another row of
        // the same table, so one change per row).
        let changed = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH changed AS (
                     UPDATE crawl_tasks SET status = 'cancelled', total = total - (
                         SELECT COUNT(*) FROM crawl_items WHERE task_id = $1 AND state = 'pending')
                     WHERE id = $1 AND status IN ('pending', 'running')
                     RETURNING id
                 ), skipped AS (
                     UPDATE crawl_items SET state = 'skipped', error = $2, claimed_by = NULL,
                         lease_until = NULL
                     WHERE task_id = $1 AND state = 'pending' AND EXISTS (SELECT 1 FROM changed)
                 ), freed AS (
                     DELETE FROM crawl_host_slots
                     WHERE host = $3 AND EXISTS (SELECT 1 FROM changed)
                 ), released AS (
                     UPDATE crawl_host_slots SET claimed_by = NULL, lease_until = NULL,
                         task_id = NULL, idx = NULL
                     WHERE task_id = $1 AND host <> $3 AND EXISTS (SELECT 1 FROM changed)
                 )
                 SELECT 1 FROM changed",
                &[&id, &super::cancelled_error(), &task_slots(id)],
            )
            .await?;
        Ok(changed.is_some())
    }

    async fn task(&self, id: &TaskId) -> StoreResult<Option<TaskRow>> {
        self.one_task(id, None).await
    }

    async fn owned_task(&self, tenant: &TenantName, id: &TaskId) -> StoreResult<Option<TaskRow>> {
        self.one_task(id, Some(tenant.stored())).await
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

    async fn unfinished(&self) -> StoreResult<Vec<TaskId>> {
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
        Ok(rows.iter().map(|row| TaskId::made(row.get(0))).collect())
    }

    async fn claim(&self, id: &TaskId, lease: &Lease) -> StoreResult<Claim> {
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
                     RETURNING i.idx, i.url, i.depth
                 )
                 SELECT idx, url, depth FROM claimed
                 UNION ALL
                 SELECT NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM claimed) AND EXISTS (
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
                    depth: row.get::<_, Option<i32>>(2).unwrap_or(0).max(0) as u32,
                },
                _ => Claim::Busy,
            },
            None => Claim::Empty,
        })
    }

    async fn renew(&self, id: &TaskId, index: usize, lease: &Lease) -> StoreResult<bool> {
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

    async fn release(&self, id: &TaskId, lease: &Lease) -> StoreResult<()> {
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
        id: &TaskId,
        index: usize,
        outcome: &ItemOutcome,
        lease: &Lease,
        announcement: &str,
    ) -> StoreResult<Option<Recorded>> {
        let (state, result, error) = outcome_columns(outcome);
        // Counting on the task's row orders finishes: progress numbers go out in commit order.
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH task AS (
                     UPDATE crawl_tasks SET finished = finished + 1
                     WHERE id = $1 AND EXISTS (
                         SELECT 1 FROM crawl_items WHERE task_id = $1 AND idx = $2
                           AND state = 'pending' AND claimed_by = $6)
                     RETURNING finished, total
                 ), item AS (
                     UPDATE crawl_items SET state = $3, result = $4, error = $5,
                         claimed_by = NULL, lease_until = NULL, finished_seq = task.finished
                     FROM task WHERE task_id = $1 AND idx = $2
                 ), slot AS (
                     UPDATE crawl_host_slots SET claimed_by = NULL, lease_until = NULL,
                         task_id = NULL, idx = NULL
                     WHERE task_id = $1 AND idx = $2 AND claimed_by = $6
                 )
                 SELECT finished, total, pg_notify($7, jsonb_set(jsonb_set($8::text::jsonb,
                     '{progress}', to_jsonb(finished)), '{total}', to_jsonb(total))::text)
                 FROM task",
                &[
                    &id,
                    &(index as i32),
                    &state,
                    &result,
                    &error,
                    &lease.owner,
                    &CHANNEL,
                    &announcement,
                ],
            )
            .await?;
        Ok(row.map(|row| Recorded {
            progress: row.get::<_, i32>(0).max(0) as usize,
            total: row.get::<_, i32>(1).max(0) as usize,
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

    async fn counts(&self, id: &TaskId) -> StoreResult<Counts> {
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "SELECT COUNT(finished_seq), COUNT(*) FILTER (WHERE state = 'failed'),
                        COUNT(*) FILTER (WHERE state = 'done'),
                        COUNT(*) FILTER (WHERE state = 'skipped'),
                        COUNT(*) FILTER (WHERE state = 'listed')
                 FROM crawl_items WHERE task_id = $1 AND state <> 'pending'",
                &[&id],
            )
            .await?;
        let count = |column: usize| {
            row.as_ref()
                .map_or(0, |row| row.get::<_, i64>(column).max(0) as usize)
        };
        Ok(Counts {
            finished: count(0),
            failed: count(1),
            read: count(2),
            skipped: count(3),
            listed: count(4),
        })
    }

    async fn finished(&self, id: &TaskId) -> StoreResult<Vec<ItemRow>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM crawl_items WHERE task_id = $1
                     AND state <> 'pending' ORDER BY finished_seq NULLS LAST, idx"
                ),
                &[&id],
            )
            .await?;
        Ok(rows.iter().map(item_row).collect())
    }

    async fn finished_page(
        &self,
        id: &TaskId,
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
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM crawl_items
                     WHERE task_id = $1 AND state <> 'pending' AND idx >= $2 AND idx <= $3
                     ORDER BY idx"
                ),
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
