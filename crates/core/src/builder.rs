//! The builder: validates a configuration and starts the dispatcher's threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::config::{ConfigError, GlobalConfig, PoolConfig, Problem};
use crate::dispatcher::Dispatcher;
use crate::handle::{DispatcherHandle, Shared};
use crate::ids::{ClientType, ProcessorId};
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
#[must_use = "a builder starts nothing until `build()`"]
pub struct DispatcherBuilder<M> {
    pools: [Option<PoolConfig>; 3],
    global: GlobalConfig,
    _message: std::marker::PhantomData<fn(M)>,
}

impl<M: Send + 'static> Dispatcher<M> {
    /// A builder with no pools configured.
    pub fn builder() -> DispatcherBuilder<M> {
        DispatcherBuilder::new()
    }
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
    pub fn pool(mut self, client_type: ClientType, config: PoolConfig) -> Self {
        self.pools[client_type.index()] = Some(config);
        self
    }

    /// How long one event may run before the monitor reports its processor as stuck.
    /// Default 1 s.
    pub fn stuck_warning(mut self, after: Duration) -> Self {
        self.global.stuck_warning = after;
        self
    }

    /// How often the monitor thread probes processors (time in queue, stuck detection).
    /// Default 10 ms.
    pub fn monitor_interval(mut self, every: Duration) -> Self {
        self.global.monitor_interval = every;
        self
    }

    /// The order in which client types are shut down. Default: queue, session, cluster.
    pub fn shutdown_order(mut self, order: [ClientType; 3]) -> Self {
        self.global.shutdown_order = order;
        self
    }

    /// The stack size, in bytes, of every thread the dispatcher starts (processors and the
    /// monitor); the platform may round it up to its minimum or to a page. Default: the
    /// standard library's (2 MiB, or `RUST_MIN_STACK`). Raise it for handlers that recurse
    /// deeply; lower it for many processors on a small machine. A size the system cannot
    /// provide makes [`build`](Self::build) fail with [`Problem::CannotSpawn`].
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let err = Dispatcher::<NoMessage>::builder()
    ///     .pool(ClientType::Queue, PoolConfig::new(1))
    ///     .stack_size(1 << 50) // 1 PiB: more than any address space holds
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err.problem, Problem::CannotSpawn { .. }), "{err}");
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.global.stack_size = Some(bytes);
        self
    }

    /// Validates the configuration and starts every processor and the monitor thread.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the pool and the problem: no pool at all, 0 processors, a
    /// capacity of 0, watermarks out of order, a `max_batch` of 0, a core id of 1024 or more
    /// or one outside this process's affinity mask, a zero duration; or
    /// [`Problem::CannotSpawn`] when the system refused a thread (out of memory or of
    /// threads, or a [`stack_size`](Self::stack_size) it cannot provide). Then every thread
    /// already started has been stopped and joined before `build` returns: nothing is left
    /// running.
    pub fn build(self) -> Result<Dispatcher<M>, ConfigError> {
        let shared = self.into_shared(Clock::real())?;
        let stack_size = shared.global.stack_size;
        // From here on, a failure drops the dispatcher built so far: its shutdown stops and
        // joins the threads already started, so that none is left behind.
        let mut dispatcher = Dispatcher {
            handle: DispatcherHandle { shared },
            threads: Vec::new(),
            monitor: None,
        };
        for processor in dispatcher.handle.shared.processors() {
            let cores = &processor.config.cores;
            let core =
                (!cores.is_empty()).then(|| cores[usize::from(processor.id.index) % cores.len()]);
            let runner = Runner::new(dispatcher.handle.clone(), processor.clone());
            let name = processor.id.to_string();
            let mut builder = thread::Builder::new().name(name.clone());
            if let Some(bytes) = stack_size {
                builder = builder.stack_size(bytes);
            }
            let spawned = match injected_spawn_failure(&dispatcher.handle.shared) {
                Some(e) => Err(e),
                None => builder.spawn(move || runner.run(core)),
            };
            let thread = spawned.map_err(|e| ConfigError {
                client_type: Some(processor.id.client_type),
                problem: Problem::CannotSpawn {
                    thread: name,
                    kind: e.kind(),
                    error: e.to_string(),
                },
            })?;
            let _ = processor.thread.set(thread.thread().clone());
            dispatcher.threads.push((processor.id, thread));
        }
        let monitor = match injected_spawn_failure(&dispatcher.handle.shared) {
            Some(e) => Err(e),
            None => monitor::Monitor::start(dispatcher.handle.shared.clone(), stack_size),
        };
        let monitor = monitor.map_err(|e| ConfigError {
            client_type: None,
            problem: Problem::CannotSpawn {
                thread: monitor::THREAD_NAME.to_string(),
                kind: e.kind(),
                error: e.to_string(),
            },
        })?;
        dispatcher.monitor = Some(monitor);
        Ok(dispatcher)
    }

    /// Validates the configuration and builds a [stepped dispatcher](crate::testing): the
    /// same processors, clients, flush contract, outboxes and timers, with no threads: the
    /// test runs the processors on its own thread
    /// ([`run_until_idle`](crate::testing::TestDispatcher::run_until_idle)) and moves the
    /// clock ([`advance`](crate::testing::TestDispatcher::advance)).
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build)'s, for the configuration.
    pub fn build_stepped(self) -> Result<crate::testing::TestDispatcher<M>, ConfigError> {
        let shared = self.into_shared(Clock::manual())?;
        let handle = DispatcherHandle { shared };
        let runners = handle
            .shared
            .processors()
            .map(|processor| Runner::new(handle.clone(), processor.clone()))
            .collect();
        let _ = handle
            .shared
            .runners
            .set(Box::new(crate::testing::Stepped::new(
                runners,
                handle.shared.global.shutdown_order,
            )));
        Ok(crate::testing::TestDispatcher::new(handle))
    }

    /// Validates the configuration and makes the state every handle shares, processors
    /// included, on `clock`; starts nothing.
    fn into_shared(self, clock: Clock) -> Result<Arc<Shared<M>>, ConfigError> {
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
        Ok(Arc::new(Shared {
            id: NEXT_DISPATCHER_ID.fetch_add(1, Ordering::Relaxed),
            pools,
            global: self.global,
            shutting_down: AtomicBool::new(false),
            stepped: clock.is_manual(),
            clock,
            runners: std::sync::OnceLock::new(),
        }))
    }
}

/// An error to fail the next thread spawn with, if a test asked for one
/// ([`spawn_failure::fail_spawn`]); always `None` outside the crate's own tests.
#[cfg(any(not(test), loom))]
#[inline]
fn injected_spawn_failure<T>(_built: &Arc<T>) -> Option<std::io::Error> {
    None
}

#[cfg(all(test, not(loom)))]
use spawn_failure::injected_spawn_failure;

/// Failing a chosen thread spawn of `build`, for the crate's own tests: which of the
/// threads `build` starts (processors in pool order, then the monitor) cannot be spawned.
#[cfg(all(test, not(loom)))]
pub(crate) mod spawn_failure {
    use std::any::Any;
    use std::cell::{Cell, RefCell};
    use std::sync::{Arc, Weak};

    std::thread_local! {
        /// Spawns left before the one that fails, on this thread; `None`: none fails.
        static FAIL_AFTER: Cell<Option<usize>> = const { Cell::new(None) };
        /// What the build whose spawn failed had shared with its threads.
        static FAILED: RefCell<Option<Weak<dyn Any + Send + Sync>>> = const { RefCell::new(None) };
    }

    /// Whether anything still holds the state that the failed build on this thread shared
    /// with its threads: a thread it started and did not join.
    pub(crate) fn failed_build_left_alive() -> bool {
        FAILED.with(|f| f.borrow().as_ref().is_some_and(|w| w.upgrade().is_some()))
    }

    /// Makes the spawn after `spawns` more (counting from 0) fail, in builds on this thread.
    pub(crate) fn fail_spawn(spawns: usize) {
        FAIL_AFTER.with(|f| f.set(Some(spawns)));
    }

    pub(super) fn injected_spawn_failure<T: Send + Sync + 'static>(
        built: &Arc<T>,
    ) -> Option<std::io::Error> {
        FAIL_AFTER.with(|f| match f.get() {
            None => None,
            Some(0) => {
                f.set(None);
                let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(built) as _;
                FAILED.with(|failed| *failed.borrow_mut() = Some(weak));
                Some(std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    "spawn failure injected by a test",
                ))
            }
            Some(n) => {
                f.set(Some(n - 1));
                None
            }
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::dispatcher::NoMessage;

    /// A thread that cannot be spawned, first, in the middle or last (the monitor), makes
    /// `build` return an error naming it, after stopping and joining every thread it had
    /// started: on the code before, it panicked (a processor) or aborted the build with a
    /// panic that left the processors already started running (the monitor).
    #[test]
    fn a_thread_that_cannot_be_spawned_is_an_error_and_nothing_is_left_running() {
        let names = ["zd-session-0", "zd-queue-0", "zd-queue-1", "zd-monitor"];
        for (spawns, name) in names.into_iter().enumerate() {
            spawn_failure::fail_spawn(spawns);
            let err = Dispatcher::<NoMessage>::builder()
                .pool(ClientType::Session, PoolConfig::new(1))
                .pool(ClientType::Queue, PoolConfig::new(2))
                .build()
                .unwrap_err();
            let Problem::CannotSpawn { thread, kind, .. } = &err.problem else {
                panic!("spawn {spawns}: {err:?}");
            };
            assert_eq!(
                (thread.as_str(), *kind),
                (name, std::io::ErrorKind::OutOfMemory)
            );
            let pool = if name.starts_with("zd-session") {
                Some(ClientType::Session)
            } else if name.starts_with("zd-queue") {
                Some(ClientType::Queue)
            } else {
                None
            };
            assert_eq!(err.client_type, pool);
            assert!(
                err.to_string()
                    .contains(&format!("cannot start thread {name}")),
                "{err}"
            );
            assert!(
                !spawn_failure::failed_build_left_alive(),
                "a thread started before the failed spawn {name} was left running"
            );
        }
        // And the next build on this thread is not affected.
        assert!(
            Dispatcher::<NoMessage>::builder()
                .pool(ClientType::Queue, PoolConfig::new(1))
                .build()
                .is_ok()
        );
    }
}
