//! Renders that start warm: scratch sessions made ahead of need — a browser context with its
//! egress lane and one blank tab, whose renderer process is already running — so a render
//! pays for neither on its own clock.
//!
//! A warm session is handed out once, to a render of the tenant it was made for (its lane is
//! under that tenant's policy), and discarded after that render like any scratch session: no
//! cookie, storage or cache crosses from one render to the next. Each one taken is replaced, up
//! to the render limit; one unused for `WARM_FOR` is closed, so an idle service holds none and
//! its browser can still be recycled.

use crate::ids::TenantName;
use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{BrowserService, SessionGuard};
use crate::tenancy::Tenant;

/// How long a warm session waits for a render before it is closed.
const WARM_FOR: Duration = Duration::from_secs(20);
/// How long making one may take (it queues for admission like any new context).
const MAKING_LIMIT: Duration = Duration::from_secs(30);

/// The warm sessions of each tenant, and how many are being made.
#[derive(Default)]
pub(super) struct WarmSessions {
    by_tenant: Mutex<HashMap<TenantName, Tenantwise>>,
    /// Numbers warm sessions, so an expiry finds its own.
    serial: AtomicU64,
}

#[derive(Default)]
struct Tenantwise {
    ready: Vec<Warm>,
    making: usize,
}

struct Warm {
    serial: u64,
    guard: SessionGuard,
}

impl WarmSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantName, Tenantwise>> {
        self.by_tenant.locked()
    }

    /// A warm session of `tenant`, if one is ready (the newest: the oldest expire first).
    pub(super) fn take(&self, tenant: &TenantName) -> Option<SessionGuard> {
        let mut by_tenant = self.lock();
        by_tenant
            .get_mut(tenant)?
            .ready
            .pop()
            .map(|warm| warm.guard)
    }

    /// Closes every warm session (the browser is going away).
    pub(super) fn clear(&self) {
        let all: Vec<SessionGuard> = self
            .lock()
            .drain()
            .flat_map(|(_, pool)| pool.ready.into_iter().map(|w| w.guard))
            .collect();
        discard_all(all);
    }

    /// Warm sessions ready now, of every tenant.
    pub(super) fn ready(&self) -> usize {
        self.lock().values().map(|pool| pool.ready.len()).sum()
    }
}

impl BrowserService {
    /// Makes one more warm session for `tenant` in the background, unless `limit` are ready
    /// or being made already.
    pub(super) fn refill_warm(self: &Arc<Self>, tenant: &Arc<Tenant>, limit: usize) {
        {
            let mut by_tenant = self.warm().lock();
            let pool = by_tenant.entry(tenant.name().clone()).or_default();
            if pool.ready.len() + pool.making >= limit {
                return;
            }
            pool.making += 1;
        }
        let (service, tenant) = (self.clone(), tenant.clone());
        tokio::spawn(async move {
            let made = service.make_warm(&tenant).await;
            let serial = service.warm().serial.fetch_add(1, Ordering::Relaxed);
            {
                let mut by_tenant = service.warm().lock();
                let pool = by_tenant.entry(tenant.name().clone()).or_default();
                pool.making = pool.making.saturating_sub(1);
                match made {
                    Some(guard) => pool.ready.push(Warm { serial, guard }),
                    None => return,
                }
            }
            tokio::time::sleep(WARM_FOR).await;
            service.expire_warm(tenant.name(), serial);
        });
    }

    /// A new scratch session of `tenant` with a blank tab, holding no admission slot.
    async fn make_warm(&self, tenant: &Arc<Tenant>) -> Option<SessionGuard> {
        let deadline = Instant::now() + MAKING_LIMIT;
        let mut guard = match self.cold_scratch_session(tenant, "render", deadline).await {
            Ok(guard) => guard,
            Err(error) => {
                tracing::debug!(message = %error.message, "no warm session made");
                return None;
            }
        };
        if let Err(error) = guard.open_tab().await {
            tracing::debug!(message = %error.message, "no warm session made");
            guard.discard().await;
            return None;
        }
        guard.release_admission();
        Some(guard)
    }

    /// Closes warm session `serial` of `tenant` if it is still unused.
    fn expire_warm(&self, tenant: &TenantName, serial: u64) {
        let expired = {
            let mut by_tenant = self.warm().lock();
            let Some(pool) = by_tenant.get_mut(tenant) else {
                return;
            };
            let Some(index) = pool.ready.iter().position(|w| w.serial == serial) else {
                return;
            };
            pool.ready.swap_remove(index)
        };
        discard_all(vec![expired.guard]);
    }
}

/// Closes sessions in the background.
fn discard_all(guards: Vec<SessionGuard>) {
    if guards.is_empty() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                for guard in guards {
                    guard.discard().await;
                }
            });
        }
        // No runtime (the service is being torn down): dropping still closes what it can.
        Err(_) => drop(guards),
    }
}
