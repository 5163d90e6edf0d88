//! The builder: validates a configuration and starts the dispatcher's threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::client::{ClientType, ProcessorId};
use crate::config::{ConfigError, GlobalConfig, PoolConfig, Problem};
use crate::dispatcher::Dispatcher;
use crate::handle::{DispatcherHandle, Shared};
use crate::monitor;
use crate::processor::{ProcessorShared, Runner};
use crate::sync::thread;

/// Each dispatcher's identity, so that `in_dispatcher_thread` tells dispatchers apart.
static NEXT_DISPATCHER_ID: AtomicU64 = AtomicU64::new(1);

/// Builds a [`Dispatcher`]: one pool of processors per client type that has one.
///
/// ```
/// use zerodispatch_core::{ClientType, Dispatcher, NoMessage, PoolConfig};
///
/// let dispatcher = Dispatcher::<NoMessage>::builder()
///     .pool(ClientType::Session, PoolConfig::new(2))
///     .pool(ClientType::Queue, PoolConfig::new(4).capacity(1 << 14))
///     .pool(ClientType::Cluster, PoolConfig::new(1))
///     .build()
///     .expect("a valid configuration");
/// assert_eq!(dispatcher.handle().processors(ClientType::Queue).len(), 4);
///
/// // Invalid settings are errors with a message, not panics.
/// let err = Dispatcher::<NoMessage>::builder()
///     .pool(ClientType::Queue, PoolConfig::new(1).watermarks(10, 5))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "queue pool: low watermark 10 must be below the high watermark 5");
/// ```
#[derive(Debug)]
pub struct DispatcherBuilder<M> {
    pools: [Option<PoolConfig>; 3],
    global: GlobalConfig,
    _message: std::marker::PhantomData<fn(M)>,
}

impl<M: Send + 'static> DispatcherBuilder<M> {
    /// A builder with no pools configured ([`Dispatcher::builder`]).
    pub(crate) fn new() -> Self {
        Self {
            pools: [None, None, None],
            global: GlobalConfig::default(),
            _message: std::marker::PhantomData,
        }
    }

    /// Configures the pool of `client_type` (replacing an earlier configuration of it).
    #[must_use]
    pub fn pool(mut self, client_type: ClientType, config: PoolConfig) -> Self {
        self.pools[client_type.index()] = Some(config);
        self
    }

    /// How long one event may run before the monitor reports its processor as stuck.
    /// Default 1 s.
    #[must_use]
    pub fn stuck_warning(mut self, after: Duration) -> Self {
        self.global.stuck_warning = after;
        self
    }

    /// How often the monitor thread probes processors (time in queue, stuck detection).
    /// Default 10 ms.
    #[must_use]
    pub fn monitor_interval(mut self, every: Duration) -> Self {
        self.global.monitor_interval = every;
        self
    }

    /// The order in which client types are shut down. Default: queue, session, cluster.
    #[must_use]
    pub fn shutdown_order(mut self, order: [ClientType; 3]) -> Self {
        self.global.shutdown_order = order;
        self
    }

    /// Validates the configuration and starts every processor and the monitor thread.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the pool and the problem: no pool at all, 0 processors, a
    /// capacity of 0, watermarks out of order, a `max_batch` of 0, a core id of 1024 or more
    /// or one outside this process's affinity mask, a zero duration.
    pub fn build(self) -> Result<Dispatcher<M>, ConfigError> {
        self.global.validate()?;
        if self.pools.iter().all(Option::is_none) {
            return Err(ConfigError {
                client_type: None,
                problem: Problem::NoPools,
            });
        }
        // Read the usable cores once, before any thread is pinned: `get_core_ids` reports
        // the calling thread's affinity mask.
        let wants_pinning = self.pools.iter().flatten().any(|p| !p.cores.is_empty());
        let usable: Vec<usize> = if wants_pinning {
            core_affinity::get_core_ids()
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.id)
                .collect()
        } else {
            Vec::new()
        };
        for (client_type, pool) in ClientType::ALL.iter().zip(&self.pools) {
            if let Some(pool) = pool {
                pool.validate(*client_type, &usable)?;
            }
        }

        let pools = ClientType::ALL.map(|client_type| {
            let Some(config) = &self.pools[client_type.index()] else {
                return Vec::new().into_boxed_slice();
            };
            (0..config.processors)
                .map(|i| {
                    let index =
                        u16::try_from(i).expect("processors validated against MAX_PROCESSORS");
                    Arc::new(ProcessorShared::new(
                        ProcessorId { client_type, index },
                        config.clone(),
                    ))
                })
                .collect()
        });
        let shared = Arc::new(Shared {
            id: NEXT_DISPATCHER_ID.fetch_add(1, Ordering::Relaxed),
            pools,
            global: self.global,
            shutting_down: AtomicBool::new(false),
        });
        let handle = DispatcherHandle { shared };

        let mut threads = Vec::new();
        for processor in handle.shared.processors() {
            let cores = &processor.config.cores;
            let core =
                (!cores.is_empty()).then(|| cores[usize::from(processor.id.index) % cores.len()]);
            let runner = Runner::new(handle.clone(), processor.clone());
            let spawned = thread::Builder::new()
                .name(processor.id.to_string())
                .spawn(move || runner.run(core));
            let thread = match spawned {
                Ok(thread) => thread,
                Err(e) => panic!("cannot spawn processor thread {}: {e}", processor.id),
            };
            let _ = processor.thread.set(thread.thread().clone());
            threads.push((processor.id, thread));
        }
        let monitor = monitor::Monitor::start(handle.shared.clone());
        Ok(Dispatcher {
            handle,
            threads,
            monitor: Some(monitor),
        })
    }
}
