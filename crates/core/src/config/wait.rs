//! How a processor waits when its queue is empty: [`WaitStrategy`], and the names a
//! command line or a configuration file gives it ([`FromStr`](std::str::FromStr),
//! [`Display`](fmt::Display), [`ParseWaitStrategyError`]).

use std::fmt;

/// How a processor waits when its queue is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Never sleep: poll the queue in a loop. The lowest wake-up latency, at the price of
    /// one core per processor, busy even when idle. For latency runs on machines with cores
    /// to spare; on a machine with more busy threads than cores it collapses throughput.
    BusySpin,
    /// Poll `spins` times (with a CPU pause hint, then yields), for at most 50 us, then
    /// park the thread until a producer wakes it (see the wake protocol in `wake.rs`). The
    /// default.
    SpinThenPark {
        /// Empty polls before parking.
        spins: u32,
    },
    /// Park as soon as the queue is empty: no CPU when idle, a wake-up (a futex syscall on
    /// Linux) for the first event after idleness.
    Park,
}

impl WaitStrategy {
    /// The default spin before parking: 2^10 polls, and never more than 50 us (the polls
    /// after the first few are yields, about 1.3 us each on a 2-core VM: 1,024 of them took
    /// 1.3 ms of CPU each time a processor ran dry, so the time bound is what ends the spin
    /// by default). Long enough to catch the next event of a burst without a syscall, short
    /// enough that an idle processor stops burning its core quickly. Retune with
    /// `benches/dispatch.rs` (`wake_latency` against `dispatch_oversubscribed`) and
    /// `perftest --rate 50` (its CPU time against its latency).
    pub const DEFAULT_SPINS: u32 = 1 << 10;
}

impl Default for WaitStrategy {
    fn default() -> Self {
        WaitStrategy::SpinThenPark {
            spins: Self::DEFAULT_SPINS,
        }
    }
}

/// The names a command line or a configuration file gives a wait strategy: `busy-spin`
/// (or `spin`), `park`, and `spin-then-park`, which is [`WaitStrategy::default`], or
/// `spin-then-park:<spins>`. Case and `-`/`_` do not matter; [`Display`](fmt::Display)
/// writes what this reads back.
///
/// ```
/// use zerodispatch_core::WaitStrategy;
///
/// assert_eq!("park".parse(), Ok(WaitStrategy::Park));
/// assert_eq!("spin-then-park:64".parse(), Ok(WaitStrategy::SpinThenPark { spins: 64 }));
/// assert_eq!(WaitStrategy::default().to_string(), "spin-then-park");
/// let err = "sleepy".parse::<WaitStrategy>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "`sleepy` is not a wait strategy (use busy-spin, park, spin-then-park or spin-then-park:<spins>)"
/// );
/// ```
impl std::str::FromStr for WaitStrategy {
    type Err = ParseWaitStrategyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase().replace('_', "-");
        match name.as_str() {
            "busy-spin" | "spin" => return Ok(WaitStrategy::BusySpin),
            "park" => return Ok(WaitStrategy::Park),
            "spin-then-park" => return Ok(WaitStrategy::default()),
            _ => {}
        }
        let err = |reason| ParseWaitStrategyError {
            input: s.to_owned(),
            reason,
        };
        let spins = name
            .strip_prefix("spin-then-park:")
            .ok_or_else(|| err(WaitReason::Unknown))?;
        let spins = spins.trim().parse().map_err(|_| err(WaitReason::Spins))?;
        Ok(WaitStrategy::SpinThenPark { spins })
    }
}

impl fmt::Display for WaitStrategy {
    /// `busy-spin`, `park`, `spin-then-park` (the default spins) or
    /// `spin-then-park:<spins>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitStrategy::BusySpin => f.write_str("busy-spin"),
            WaitStrategy::Park => f.write_str("park"),
            WaitStrategy::SpinThenPark {
                spins: Self::DEFAULT_SPINS,
            } => f.write_str("spin-then-park"),
            WaitStrategy::SpinThenPark { spins } => write!(f, "spin-then-park:{spins}"),
        }
    }
}

/// A string that names no [`WaitStrategy`]; its message says what would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseWaitStrategyError {
    input: String,
    reason: WaitReason,
}

/// What is wrong with a wait strategy's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitReason {
    /// No strategy has this name.
    Unknown,
    /// `spin-then-park:` followed by something other than a count.
    Spins,
}

impl fmt::Display for ParseWaitStrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        match self.reason {
            WaitReason::Unknown => write!(
                f,
                "`{input}` is not a wait strategy (use busy-spin, park, spin-then-park or spin-then-park:<spins>)"
            ),
            WaitReason::Spins => write!(
                f,
                "`{input}`: the spins of spin-then-park:<spins> must be a whole number from 0 to {}",
                u32::MAX
            ),
        }
    }
}

impl std::error::Error for ParseWaitStrategyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_strategies_round_trip_through_their_names() {
        for wait in [
            WaitStrategy::BusySpin,
            WaitStrategy::Park,
            WaitStrategy::default(),
            WaitStrategy::SpinThenPark { spins: 0 },
            WaitStrategy::SpinThenPark { spins: 7 },
            WaitStrategy::SpinThenPark { spins: u32::MAX },
        ] {
            assert_eq!(wait.to_string().parse(), Ok(wait), "{wait}");
        }
    }

    #[test]
    fn wait_strategy_names_ignore_case_and_separators() {
        assert_eq!("spin".parse(), Ok(WaitStrategy::BusySpin));
        assert_eq!(" Busy_Spin ".parse(), Ok(WaitStrategy::BusySpin));
        assert_eq!("PARK".parse(), Ok(WaitStrategy::Park));
        assert_eq!(
            "spin_then_park".parse(),
            Ok(WaitStrategy::SpinThenPark {
                spins: WaitStrategy::DEFAULT_SPINS
            })
        );
        assert_eq!(
            "spin-then-park: 12".parse(),
            Ok(WaitStrategy::SpinThenPark { spins: 12 })
        );
    }

    #[test]
    fn bad_wait_strategies_are_errors_that_say_what_to_write() {
        for bad in ["", "sleep", "spin-then-parked", "park:3"] {
            let err = bad.parse::<WaitStrategy>().unwrap_err();
            assert!(
                err.to_string()
                    .contains("is not a wait strategy (use busy-spin"),
                "{bad}: {err}"
            );
        }
        for bad in [
            "spin-then-park:",
            "spin-then-park:-1",
            "spin-then-park:4294967296",
        ] {
            let err = bad.parse::<WaitStrategy>().unwrap_err();
            assert!(
                err.to_string()
                    .contains("must be a whole number from 0 to 4294967295"),
                "{bad}: {err}"
            );
        }
    }
}
