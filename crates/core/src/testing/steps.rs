//! What a handle needs of a stepped dispatcher's processors, as a trait object: the state
//! every handle shares holds one, and needs nothing else of `testing`.

use crate::ids::ProcessorId;

/// A stepped dispatcher's processors, behind a trait object so that the state every
/// handle shares need not name their message type's bounds.
pub(crate) trait Steps: Send + Sync {
    /// The processors that have not exited, in pool order.
    fn live(&self) -> Vec<ProcessorId>;
    /// One step of processor `id` (a turn of at most `budget` events, then its end of life
    /// if stopping), and the shutdown moved on if that ended its pool. Returns the work done
    /// (0 for a processor that has exited).
    fn step(&self, id: ProcessorId, budget: u64) -> u64;
    /// Rounds of every processor until one does nothing; `Err` with what keeps them busy
    /// after [`MAX_TURNS`](super::MAX_TURNS) rounds.
    fn run_until_idle(&self) -> Result<u64, String>;
    /// The earliest deadline of a timer taken in by a processor (nanoseconds on the
    /// dispatcher's clock).
    fn next_deadline(&self) -> Option<u64>;
    /// Starts the shutdown: the first pool's gates close and its processors are told to
    /// stop. Idempotent.
    fn begin_shutdown(&self);
    /// Whether every processor has exited.
    fn is_shut_down(&self) -> bool;
    /// [`begin_shutdown`](Self::begin_shutdown), then rounds until every processor has
    /// exited; `Err` naming what keeps the stopping pool alive after [`MAX_TURNS`](super::MAX_TURNS) rounds.
    fn shut_down(&self) -> Result<(), String>;
}
