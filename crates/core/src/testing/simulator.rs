//! A seeded simulator of a stepped dispatcher: the same processors and turns as on
//! threads, with every choice the threads' timing would make drawn from one `u64` seed.
//!
//! Each [`step`](Simulator::step) draws either a processor and how far it goes (a turn
//! of one, a few or all of its queued events) or a move of the clock (to the next
//! deadline, or part of the way). The test draws its own actions (dispatches, registers,
//! drops, a shutdown in mid-stream) from the same [`SimRng`], between steps, and checks
//! its invariants as it goes. The same seed gives the same run, step for step, so that
//! [`explore`] can report a failing seed with the steps that led to it, and running that
//! seed alone replays it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use super::machine::MAX_TURNS;
use super::steps::Steps;
use crate::handle::DispatcherHandle;

/// How many of the last steps a [`Failure`] shows.
const TRACE_LEN: usize = 40;

std::thread_local! {
    /// The last steps of the run under way on this thread, for [`explore`]'s report.
    static TRACE: RefCell<VecDeque<String>> = const { RefCell::new(VecDeque::new()) };
    /// Steps made on this thread since [`explore`] last looked.
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn trace(line: String) {
    TRACE.with(|t| {
        let mut t = t.borrow_mut();
        if t.len() == TRACE_LEN {
            t.pop_front();
        }
        t.push_back(line);
    });
}

/// A small, fast, deterministic generator (SplitMix64): every draw of a simulation comes
/// from it, so a seed names a whole run.
#[derive(Clone, Debug)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// The generator of `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "SimRng::below(0)");
        // Multiply-shift: no modulo bias worth a test's concern, no division.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `true` once in `n` draws, on average.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n.max(1)) == 0
    }

    /// One of `items`, or `None` if it is empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len() as u64) as usize)
    }
}

/// A stepped dispatcher ([`TestDispatcher`](super::TestDispatcher)) driven from a seed
/// (the module docs). It holds a handle, not the dispatcher, so that whatever owns the
/// `TestDispatcher` (a test, or a component built on one) keeps it; derefs to the
/// handle for the test's own dispatches, registers and checks.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use zerodispatch_core::testing::{Simulator, explore};
/// use zerodispatch_core::*;
///
/// /// Records what it gets, in order.
/// struct Log(Arc<Mutex<Vec<u64>>>);
/// impl Client<u64> for Log {
///     fn on_message(&mut self, n: u64, _ctx: &mut Context<u64>) { self.0.lock().unwrap().push(n) }
/// }
///
/// let seeds = explore(0..50, |seed| format!("seed {seed}"), |seed| {
///     let test = Dispatcher::<u64>::builder()
///         .pool(ClientType::Queue, PoolConfig::new(2).capacity(4))
///         .build_stepped()
///         .unwrap();
///     let mut sim = Simulator::new(test.handle(), seed);
///     let got = Arc::new(Mutex::new(Vec::new()));
///     let log = sim.register(ClientType::Queue, Log(got.clone()), Placement::LeastLoaded).unwrap();
///     let mut sent = 0;
///     while sent < 20 {
///         if sim.rng().one_in(2) {
///             // A full queue hands the event back: try again after a step.
///             if sim.try_dispatch(log, Event::Message(sent)).is_ok() { sent += 1 }
///         } else {
///             sim.step();
///         }
///     }
///     sim.settle();
///     // Invariant: every event accepted ran once, in order.
///     assert_eq!(*got.lock().unwrap(), (0..20).collect::<Vec<_>>());
///     sim.shutdown();
/// }).unwrap();
/// assert_eq!(seeds.seeds, 50);
/// ```
pub struct Simulator<M: Send + 'static> {
    test: DispatcherHandle<M>,
    rng: SimRng,
    seed: u64,
}

impl<M: Send + 'static> Simulator<M> {
    /// The simulator of the stepped dispatcher of `test`, every draw from `seed`.
    ///
    /// # Panics
    ///
    /// If `test` is a handle of a dispatcher with threads.
    pub fn new(test: DispatcherHandle<M>, seed: u64) -> Self {
        assert!(
            test.steps().is_some(),
            "Simulator::new takes a handle of a stepped dispatcher (build_stepped)"
        );
        trace(format!("seed {seed}"));
        Self {
            test,
            rng: SimRng::new(seed),
            seed,
        }
    }

    /// The seed it draws from.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A handle of the dispatcher it drives, for clients and code under test.
    #[must_use]
    pub fn handle(&self) -> DispatcherHandle<M> {
        self.test.clone()
    }

    /// The generator, for the test's own draws between steps.
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Writes `what` (the test's own action) among the steps a failure reports.
    pub fn note(&self, what: impl fmt::Display) {
        trace(format!("  test: {what}"));
    }

    fn steps(&self) -> &dyn Steps {
        self.test
            .steps()
            .expect("a TestDispatcher has its stepped processors")
    }

    /// One step drawn from the seed: most often a turn of one processor, of at most 1, 2,
    /// 3, 8, 64 or all of its events; otherwise a move of the clock, to the next deadline
    /// of a timer taken in, or part of the way there (or a few microseconds with none).
    /// Returns the work done, as
    /// [`TestDispatcher::run_until_idle`](super::TestDispatcher::run_until_idle) counts it.
    pub fn step(&mut self) -> u64 {
        STEPS.with(|s| s.set(s.get() + 1));
        let live = self.steps().live();
        if !live.is_empty() && !self.rng.one_in(6) {
            let id = *self.rng.pick(&live).expect("live is not empty");
            let budget = *self
                .rng
                .pick(&[1, 2, 3, 8, 64, u64::MAX])
                .expect("a budget");
            let work = self.steps().step(id, budget);
            let budget = if budget == u64::MAX {
                "all".to_string()
            } else {
                budget.to_string()
            };
            trace(format!("turn {id} (up to {budget} events): {work} done"));
            return work;
        }
        let clock = &self.test.shared.clock;
        let now = clock.now_ns();
        let to = match self.steps().next_deadline() {
            Some(next) if next > now && self.rng.one_in(2) => next,
            Some(next) if next > now => now + 1 + self.rng.below(next - now),
            _ => now + 1 + self.rng.below(5_000),
        };
        clock.advance_to(to);
        trace(format!("clock +{} ns", to - now));
        0
    }

    /// Steps until the processors are idle: random steps until a run of them did nothing,
    /// then rounds of every processor, as
    /// [`TestDispatcher::run_until_idle`](super::TestDispatcher::run_until_idle), to be
    /// sure. Returns the work done.
    ///
    /// # Panics
    ///
    /// As `TestDispatcher::run_until_idle`.
    pub fn settle(&mut self) -> u64 {
        let mut done = 0;
        let mut quiet = 0;
        while quiet < 4 * self.steps().live().len().max(1) {
            let work = self.step();
            done += work;
            quiet = if work == 0 { quiet + 1 } else { 0 };
        }
        done + self.test.run_stepped()
    }

    /// [`TestDispatcher::run_until_idle`](super::TestDispatcher::run_until_idle): rounds of
    /// every processor until one does nothing.
    ///
    /// # Panics
    ///
    /// As `TestDispatcher::run_until_idle`.
    pub fn run_until_idle(&self) -> u64 {
        self.test.run_stepped()
    }

    /// [`TestDispatcher::advance`](super::TestDispatcher::advance): the clock moved deadline
    /// by deadline, the processors run until idle at each.
    ///
    /// # Panics
    ///
    /// As `TestDispatcher::run_until_idle`.
    pub fn advance(&self, by: Duration) -> u64 {
        self.test.advance_stepped(by)
    }

    /// Shuts down as [`TestDispatcher::shutdown`](super::TestDispatcher::shutdown) does,
    /// with every turn of it drawn from the seed: the first pool closes now, the next once
    /// the first has exited, and so on.
    ///
    /// # Panics
    ///
    /// Where a threaded shutdown would never end, as `TestDispatcher::shutdown`.
    pub fn shutdown(&mut self) {
        trace("shutdown begins".into());
        self.test.begin_shutdown_stepped();
        for _ in 0..MAX_TURNS {
            if self.steps().is_shut_down() {
                trace("shut down".into());
                return;
            }
            self.step();
        }
        if let Err(stuck) = self.test.shutdown_stepped() {
            panic!("zerodispatch::testing: {stuck}");
        }
    }
}

impl<M: Send + 'static> Deref for Simulator<M> {
    type Target = DispatcherHandle<M>;

    fn deref(&self) -> &DispatcherHandle<M> {
        &self.test
    }
}

impl<M: Send + 'static> fmt::Debug for Simulator<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("seed", &self.seed)
            .field("test", &self.test)
            .finish_non_exhaustive()
    }
}

/// What [`explore`] ran.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// Seeds run, every one passed.
    pub seeds: u64,
    /// Simulator steps made, in all.
    pub steps: u64,
    /// How long it took.
    pub elapsed: Duration,
}

impl Exploration {
    /// Seeds run per second.
    #[must_use]
    pub fn seeds_per_second(&self) -> f64 {
        self.seeds as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// A seed whose run failed: what failed, the steps that led there, and how to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The panic's message.
    pub message: String,
    /// The last steps, oldest first (the simulator's and the test's [notes](Simulator::note)).
    pub last_steps: Vec<String>,
    /// The command that replays it, as the caller of [`explore`] wrote it.
    pub replay: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed: {}", self.seed, self.message)?;
        writeln!(f, "replay it with: {}", self.replay)?;
        writeln!(f, "its last steps:")?;
        for step in &self.last_steps {
            writeln!(f, "  {step}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// Runs `scenario` for each seed, in order, until one panics: `Err` with that seed, its
/// panic's message, its last steps and `replay(seed)`, the command that replays it.
///
/// # Errors
///
/// The first seed whose scenario panicked.
pub fn explore(
    seeds: impl IntoIterator<Item = u64>,
    replay: impl Fn(u64) -> String,
    scenario: impl Fn(u64),
) -> Result<Exploration, Failure> {
    let start = Instant::now();
    let mut ran = 0;
    STEPS.with(|s| s.set(0));
    for seed in seeds {
        TRACE.with(|t| t.borrow_mut().clear());
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| scenario(seed))) {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            return Err(Failure {
                seed,
                message,
                last_steps: TRACE.with(|t| t.borrow_mut().drain(..).collect()),
                replay: replay(seed),
            });
        }
        ran += 1;
    }
    Ok(Exploration {
        seeds: ran,
        steps: STEPS.with(std::cell::Cell::get),
        elapsed: start.elapsed(),
    })
}

/// The `main` of a simulation binary (an example, a `harness = false` test): runs
/// `scenario` over the seeds its command line names and exits 1 on a failing seed, after
/// printing it with its last steps and the command that replays it, or 2 on bad arguments.
///
/// Arguments: `--seeds N` (seeds `0..N`, default `default_seeds`), `--from S` (start at `S`),
/// `--seed S` (replay one). `replay` is the command a failing seed is replayed with, to
/// which ` --seed S` is added (for an example: `cargo run --release --example NAME --`).
pub fn explore_main(replay: &str, default_seeds: u64, scenario: impl Fn(u64)) {
    let mut args = std::env::args().skip(1);
    let (mut from, mut count) = (0_u64, default_seeds);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--seeds", Some(n)) => count = n,
            ("--from", Some(s)) => from = s,
            ("--seed", Some(s)) => (from, count) = (s, 1),
            _ => {
                eprintln!("usage: [--seeds N] [--from S] [--seed S] (not {arg})");
                std::process::exit(2);
            }
        }
    }
    let seeds = from..from.saturating_add(count);
    match explore(seeds, |seed| format!("{replay} --seed {seed}"), scenario) {
        Ok(explored) => println!(
            "{} seeds passed, {} steps, in {:.2} s: {:.0} seeds/s",
            explored.seeds,
            explored.steps,
            explored.elapsed.as_secs_f64(),
            explored.seeds_per_second()
        ),
        Err(failure) => {
            eprintln!("{failure}");
            std::process::exit(1);
        }
    }
}
