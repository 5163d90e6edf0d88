//! How a broker starts and ends: [`Broker::start`] checks the configuration, starts the
//! dispatcher's pools and registers the queues and the cluster client; [`Broker::shutdown`]
//! drains and stops them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use zerodispatch_core::{
    ClientHandle, ClientType, ConfigError, Dispatcher, DispatcherBuilder, Placement, PoolConfig,
    Problem,
};

use crate::cluster::ClusterClient;
use crate::credits::Credits;
use crate::dedup::StoredIds;
use crate::error::BrokerError;
use crate::ids::QueueId;
use crate::limits::{
    MAX_APPS, MAX_DEDUP_WINDOW, MAX_PRODUCER_NAMES, MAX_QUEUE_CAPACITY, MIN_DEDUP_WINDOW,
};
use crate::names::Names;
use crate::protocol::BrokerMsg;
use crate::queue::{QueueClient, QueueEngine};
use crate::stats::{ClusterCounters, QueueCounters};

use super::{Broker, BrokerConfig, Owner};

impl Broker {
    /// Starts the dispatcher and creates the queues and the cluster client.
    ///
    /// # Errors
    ///
    /// An invalid dispatcher or queue configuration (a capacity above
    /// [`MAX_QUEUE_CAPACITY`] included), or a queue whose tables cannot be allocated: an
    /// error, never an abort.
    pub fn start(config: BrokerConfig) -> Result<Self, BrokerError> {
        Self::start_on(config, |builder| builder.build().map(Owner::Threads))
    }

    /// Starts the broker as [`start`](Self::start) does, on a dispatcher whose processors
    /// are built by `build` from the broker's configuration of them.
    pub(super) fn start_on(
        config: BrokerConfig,
        build: impl FnOnce(DispatcherBuilder<BrokerMsg>) -> Result<Owner, ConfigError>,
    ) -> Result<Self, BrokerError> {
        for (i, q) in config.queues.iter().enumerate() {
            let id = QueueId(i as u32);
            if q.capacity == 0 || q.capacity > MAX_QUEUE_CAPACITY {
                return Err(BrokerError::QueueCapacityOutOfRange {
                    queue: id,
                    capacity: q.capacity,
                });
            }
            if q.mode.apps() == 0 || q.mode.apps() > MAX_APPS {
                return Err(BrokerError::AppsOutOfRange {
                    queue: id,
                    apps: q.mode.apps(),
                });
            }
            if q.window == 0 {
                return Err(BrokerError::ZeroWindow { queue: id });
            }
        }
        if config.max_producer_names > MAX_PRODUCER_NAMES {
            return Err(BrokerError::ProducerNamesOutOfRange {
                max_producer_names: config.max_producer_names,
            });
        }
        if !config.dedup_window.is_power_of_two()
            || !(MIN_DEDUP_WINDOW..=MAX_DEDUP_WINDOW).contains(&config.dedup_window)
        {
            return Err(BrokerError::DedupWindowOutOfRange {
                dedup_window: config.dedup_window,
            });
        }
        let names = Names::new(config.max_producer_names).map_err(|_| {
            BrokerError::ProducerNamesOutOfRange {
                max_producer_names: config.max_producer_names,
            }
        })?;
        let names = Arc::new(Mutex::new(names));
        if let Some(r) = config.replication.filter(|r| !r.is_valid()) {
            return Err(BrokerError::ReplicationOutOfRange {
                replicas: r.replicas,
                quorum: r.quorum,
            });
        }
        // One list of cores for all pools, dealt out in turn: the session processors take
        // the first, the queue processors the next, the cluster processor the one after.
        let cores_from = |first: usize| -> Vec<usize> {
            let n = config.cores.len();
            (0..n)
                .map(|i| config.cores[(first + i) % n.max(1)])
                .collect()
        };
        let pool = |n, first_core| {
            PoolConfig::new(n)
                .capacity(config.event_capacity)
                .max_batch(config.max_batch)
                .wait(config.wait)
                .driven(config.driven)
                .pin_to(cores_from(first_core))
                // Only the session processors run timers: the producers' tickers.
                .timers(0)
        };
        let mut builder = Dispatcher::<BrokerMsg>::builder().pool(
            ClientType::Session,
            pool(config.session_processors, 0).timers(config.timed_producers),
        );
        // No queue processors: the queues run on the session processors, beside the
        // sessions that send them their messages.
        let queue_pool = if config.queue_processors == 0 {
            ClientType::Session
        } else {
            builder = builder.pool(
                ClientType::Queue,
                pool(config.queue_processors, config.session_processors),
            );
            ClientType::Queue
        };
        let builder = builder.pool(
            ClientType::Cluster,
            pool(1, config.session_processors + config.queue_processors),
        );
        let owner = build(builder)?;
        let stepped = matches!(owner, Owner::Stepped(_));
        let dispatcher = owner.handle();
        let mut handles = Vec::with_capacity(config.queues.len());
        let mut queue_counters = Vec::with_capacity(config.queues.len());
        let mut stored_ids = Vec::with_capacity(config.queues.len());
        for (i, q) in config.queues.iter().enumerate() {
            let counters = Arc::new(CachePadded::new(QueueCounters::default()));
            let id = QueueId(i as u32);
            let too_large = |_| BrokerError::QueueTablesTooLarge {
                queue: id,
                capacity: q.capacity,
            };
            let ids = StoredIds::new(config.max_producer_names, config.dedup_window)
                .map_err(too_large)?;
            let engine = QueueEngine::new(
                id,
                q.mode,
                (q.capacity, q.window),
                config.replication,
                (config.on_release.clone(), ids.clone(), names.clone()),
                counters.clone(),
            )
            .map_err(too_large)?;
            stored_ids.push(ids);
            handles.push(
                dispatcher
                    .register(queue_pool, QueueClient::new(engine), Placement::LeastLoaded)
                    .map_err(BrokerError::refused_register)?
                    .erase(),
            );
            queue_counters.push(counters);
        }
        let queues: Arc<[ClientHandle]> = handles.into();
        let cluster_counters = Arc::new(CachePadded::new(ClusterCounters::default()));
        // Confirms sent to the cluster and not yet routed, at most: the cluster processor's
        // event capacity from replicas, as many from consumers.
        let replica_credits = Arc::new(Credits::new(config.event_capacity));
        let consumer_credits = Arc::new(Credits::new(config.event_capacity));
        let cluster = dispatcher
            .register(
                ClientType::Cluster,
                ClusterClient::new(
                    queues.clone(),
                    cluster_counters.clone(),
                    (replica_credits.clone(), consumer_credits.clone()),
                )
                .map_err(|_| {
                    BrokerError::Config(ConfigError {
                        client_type: Some(ClientType::Cluster),
                        problem: Problem::CapacityTooLarge(config.event_capacity),
                    })
                })?,
                Placement::LeastLoaded,
            )
            .map_err(BrokerError::refused_register)?
            .erase();
        Ok(Self {
            dispatcher,
            owner,
            stepped,
            queues,
            queue_configs: config.queues,
            queue_counters,
            sessions: Arc::default(),
            cluster,
            cluster_counters,
            replica_credits,
            consumer_credits,
            max_batch: config.max_batch,
            event_capacity: config.event_capacity,
            replication: config.replication,
            names,
            stored_ids,
            dedup_window: config.dedup_window,
            anonymous_producers: AtomicU64::new(0),
            // Below `MAX_PRODUCER_NAMES`, checked above: fits a `u32`.
            max_producer_names: config.max_producer_names as u32,
            consumers_opened: AtomicU64::new(0),
            consumers_open: Arc::default(),
            timed_producers: (0..config.session_processors)
                .map(|_| Arc::default())
                .collect(),
            timed_producers_limit: config.timed_producers,
        })
    }

    /// Shuts the broker down: queues drain first, then sessions (each producer session
    /// reports its messages without an outcome `Closed`), then the cluster.
    pub fn shutdown(mut self) {
        self.owner.shutdown();
    }
}
