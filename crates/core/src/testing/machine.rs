//! The processors of a stepped dispatcher as a state machine that whoever drives it turns:
//! [`TestDispatcher`](super::TestDispatcher) round-robin, the
//! [`Simulator`](super::Simulator) from a seed. A step is one
//! [`Runner::turn`](crate::processor::Runner), the function a processor thread's loop
//! runs between two waits; shutdown is the threads' own protocol, pool by pool, its end of
//! life reached by the same turns.

use std::sync::Mutex;

use super::steps::Steps;
use crate::ids::{ClientType, ProcessorId};
use crate::processor::Runner;

/// How many rounds (a turn of every processor)
/// [`TestDispatcher::run_until_idle`](super::TestDispatcher::run_until_idle) and
/// [`TestDispatcher::shutdown`](super::TestDispatcher::shutdown) make at most before they
/// report the processors that keep them busy (a client asking to be flushed again at every flush, events bounced for ever).
pub const MAX_TURNS: usize = 100_000;

/// The runners and how far shutdown has come.
pub(crate) struct Stepped<M: Send + 'static> {
    machine: Mutex<Machine<M>>,
}

struct Machine<M: Send + 'static> {
    /// The processors that have not exited, in pool order.
    runners: Vec<Runner<M>>,
    /// The shutdown order of the pools.
    order: [ClientType; 3],
    /// How many pools of `order` shutdown has closed; 0 before it starts.
    closed: usize,
}

impl<M: Send + 'static> Stepped<M> {
    pub(crate) fn new(runners: Vec<Runner<M>>, order: [ClientType; 3]) -> Self {
        Self {
            machine: Mutex::new(Machine {
                runners,
                order,
                closed: 0,
            }),
        }
    }

    fn machine(&self) -> std::sync::MutexGuard<'_, Machine<M>> {
        self.machine.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<M: Send + 'static> Machine<M> {
    /// Steps the runner at `index`; exits it if it ended its life, then moves the shutdown
    /// on past every pool that has no processor left.
    fn step_at(&mut self, index: usize, budget: u64) -> u64 {
        let (work, ended) = self.runners[index].step(budget);
        if ended {
            self.runners.remove(index).exit();
            self.close_finished_pools();
        }
        work
    }

    /// Shutdown's next pools: once the pool being shut down has no processor left, the
    /// next one's gates close and its processors are told to stop, as the threads'
    /// shutdown does after joining a pool.
    fn close_finished_pools(&mut self) {
        while self.closed > 0 && self.closed < self.order.len() {
            let stopping = self.order[self.closed - 1];
            if self
                .runners
                .iter()
                .any(|r| r.shared().id.client_type == stopping)
            {
                return;
            }
            self.close_pool(self.closed);
        }
    }

    /// Closes every gate of pool `order[n]`, then tells its processors to stop.
    fn close_pool(&mut self, n: usize) {
        self.closed = n + 1;
        let pool = self.order[n];
        let stopping = || {
            self.runners
                .iter()
                .filter(move |r| r.shared().id.client_type == pool)
        };
        for runner in stopping() {
            runner.shared().close();
        }
        for runner in stopping() {
            runner.shared().request_stop();
        }
    }

    /// One round: a step of every processor. Returns the work done.
    fn round(&mut self) -> u64 {
        let mut work = 0;
        let mut i = 0;
        while i < self.runners.len() {
            let before = self.runners.len();
            work += self.step_at(i, u64::MAX);
            // An exited runner left its place to the next one.
            if self.runners.len() == before {
                i += 1;
            } else {
                work += 1;
            }
        }
        work
    }

    /// What keeps the live processors busy, one line each.
    fn busy_report(&self, which: impl Fn(&Runner<M>) -> bool) -> String {
        self.runners
            .iter()
            .filter(|r| which(r))
            .map(Runner::busy_with)
            .collect::<Vec<_>>()
            .join("\n  ")
    }
}

impl<M: Send + 'static> Steps for Stepped<M> {
    fn live(&self) -> Vec<ProcessorId> {
        self.machine()
            .runners
            .iter()
            .map(|r| r.shared().id)
            .collect()
    }

    fn step(&self, id: ProcessorId, budget: u64) -> u64 {
        let mut machine = self.machine();
        match machine.runners.iter().position(|r| r.shared().id == id) {
            Some(index) => machine.step_at(index, budget),
            None => 0,
        }
    }

    fn run_until_idle(&self) -> Result<u64, String> {
        let mut machine = self.machine();
        let mut done = 0;
        for _ in 0..MAX_TURNS {
            let work = machine.round();
            if work == 0 {
                return Ok(done);
            }
            done += work;
        }
        Err(format!(
            "the processors are still busy after {MAX_TURNS} rounds:\n  {}",
            machine.busy_report(|_| true)
        ))
    }

    fn next_deadline(&self) -> Option<u64> {
        self.machine()
            .runners
            .iter()
            .filter_map(Runner::next_deadline)
            .min()
    }

    fn begin_shutdown(&self) {
        let mut machine = self.machine();
        if machine.closed == 0 {
            machine.close_pool(0);
            machine.close_finished_pools();
        }
    }

    fn is_shut_down(&self) -> bool {
        self.machine().runners.is_empty()
    }

    fn shut_down(&self) -> Result<(), String> {
        self.begin_shutdown();
        let mut machine = self.machine();
        for _ in 0..MAX_TURNS {
            if machine.runners.is_empty() {
                return Ok(());
            }
            machine.round();
        }
        let stopping = machine.order[machine.closed - 1];
        Err(format!(
            "shutdown has not ended after {MAX_TURNS} rounds (on threads it would never \
             end); the {stopping:?} pool is kept alive by:\n  {}",
            machine.busy_report(|r| r.shared().id.client_type == stopping)
        ))
    }
}
