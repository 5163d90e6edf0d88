//! The processor loop's tuned constants, each with why it is what it is and how to retune
//! it with data.

use std::time::Duration;

/// Check the queue depth (watermarks, max depth) and look at the waiters (producers and
/// futures blocked on a full queue, woken at room for a burst) every this many events
/// within a drain, starting after its first event (which may have been a long one, during
/// which the queue filled): often enough to see a queue filling up under sustained load
/// and to wake a blocked producer while a 256-event queue or larger still holds three
/// quarters of its work, rarely enough that the loads of head and tail (cache lines the
/// producers write) cost nothing measurable. (A countdown of its own for the waiters,
/// an eighth of the capacity, cost the drain 8 ns an event on the hop bench, 51.6 against
/// 42.8 ns: folded into this check it costs nothing measurable.) Below 256 events a
/// waiter is woken at a flush point or when the run ends.
pub(super) const DEPTH_CHECK_INTERVAL: u64 = 64;

/// How long a processor that has just emptied its queue after a run of events waits
/// before it looks again, reading nothing a producer writes meanwhile.
///
/// A processor faster than its producers empties its queue every few events; each look
/// at an empty queue reads the queue's tail, the line every producer's push writes with a
/// compare-and-swap, and each such read makes the next push wait for that line to come
/// back from the processor's core. Waiting a moment first lets a producer in mid-stream
/// push a run of events undisturbed, which the processor then pops in one go: fewer looks
/// per event, longer flush batches. Measured on the hop bench (one producer, a typed
/// confirm): 37 ns per event without, 25 ns with a 0.7 us linger, 23.5 ns with 1.4 us, no
/// gain beyond. The price is the linger itself, paid once per drained run before the
/// flush that ends it: a microsecond against the tens of microseconds of a confirm's
/// round trip at low rates. Not in a driven turn (`Runner::drive`): its driver is the
/// producer a linger would wait for.
pub(super) const LINGER: Duration = Duration::from_micros(1);

/// How long the lingers of one drain grow: each lasts twice the one before, up to this many
/// times [`LINGER`].
///
/// A processor about as fast as its producer runs neck and neck with it at a fixed linger:
/// each look finds the one or two events pushed meanwhile, so the processor lingers
/// nearly half its time and the producer's pushes keep meeting the processor's reads of
/// the queue's tail. Growing lingers let a producer that keeps refilling the queue get
/// ahead, and the processor then pops long runs. Measured on the hop bench (typed 24-byte
/// callback, two interleaved rounds, ns per event): fixed 1 us 101-155 pinned, 130-266
/// unpinned; growth 4: 55-72 and 54-89; growth 8: 54-56 and 55-65; growth 16: 49-56 and
/// 48-54; inline dispatch and batches unchanged within noise. The first linger of a drain
/// stays [`LINGER`], so a lone event (low rates) pays what it paid; the price is at the
/// end of a burst that kept the processor busy for several runs, whose last events wait up
/// to this many times [`LINGER`] (8 us) for the flush instead of one.
pub(super) const LINGER_GROWTH: u32 = 8;

/// The shortest and longest timed park of a processor that has events in its outbox or
/// clients asking to be flushed again: it retries that often with nothing else to do,
/// doubling the wait after each fruitless turn. The minimum keeps a retry within a few
/// wake-ups of the target draining; the maximum bounds how long a kept event can sit
/// after room appeared while its sender is idle. Retune with the tests that bounce events
/// between processors on queues of 8 (`tests/soak.rs`, `tests/audit.rs`) under load.
pub(super) const RETRY_PARK_MIN: Duration = Duration::from_micros(20);
pub(super) const RETRY_PARK_MAX: Duration = Duration::from_millis(1);

/// How long a `SpinThenPark` processor polls for work at most before it parks, whatever its
/// `spins`: 50 us. The polls after the first few are `yield_now`s, which on this project's
/// 2-core VM cost about 1.3 us each, so the default 1,024 polls took about 1.3 ms of CPU
/// every time a processor ran dry (measured: `zd-server` used 1.3-1.5 CPU-seconds per 10 s
/// at 50 msg/s, all of it in these spins). 50 us still covers the hops within one
/// message's path (a PUT, its ACK, a push and its confirm follow each other within a few
/// microseconds while the next processor spins), which is what the spin is for; an event
/// that comes later than that pays a wake-up. Retune with `perftest --rate 50 --duration
/// 10s --json` (its `cpu.broker_threads_s` against `confirm_latency_us.p50`), and with
/// `benches/dispatch.rs`' `wake_latency`.
pub(super) const SPIN_WINDOW: Duration = Duration::from_micros(50);

/// How long a processor parks when its queue is empty but entries are ahead of what it
/// popped (a producer between its entry and its push, or an event kept in an outbox): a
/// push follows its entry within nanoseconds, an outboxed event within the sender's next
/// retry. Short enough to cost no visible latency, long enough not to spin.
pub(super) const BRIEF_PARK: Duration = Duration::from_micros(20);
