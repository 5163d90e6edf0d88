//! The names a command line or a configuration file gives the broker's choices:
//! [`FlushStrategy`] and [`ConfirmMode`] implement [`FromStr`] and [`Display`], and
//! `Display` writes what `FromStr` reads back. ([`WaitStrategy`](crate::WaitStrategy)
//! has the same in the core.)

use std::fmt::{self, Display};
use std::str::FromStr;
use std::time::Duration;

use crate::message::ConfirmMode;
use crate::session::FlushStrategy;

/// `dynamic`, or `timer:<interval>`: a number (decimals allowed) and a unit among `ns`,
/// `us`, `ms`, `s`, `m`, `h` (`timer:100ms`, `timer:1.5s`); a bare number is milliseconds
/// (`timer:100`). The interval must be above zero. Case does not matter.
///
/// ```
/// use std::time::Duration;
/// use zerodispatch_broker::FlushStrategy;
///
/// assert_eq!("dynamic".parse(), Ok(FlushStrategy::Dynamic));
/// assert_eq!("timer:100".parse(), Ok(FlushStrategy::Timer(Duration::from_millis(100))));
/// assert_eq!(FlushStrategy::Timer(Duration::from_micros(250)).to_string(), "timer:250us");
/// let err = "timer:0ms".parse::<FlushStrategy>().unwrap_err();
/// assert_eq!(err.to_string(), "`timer:0ms`: the timer's interval must be above zero");
/// ```
impl FromStr for FlushStrategy {
    type Err = ParseFlushStrategyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| ParseFlushStrategyError {
            input: s.to_owned(),
            reason,
        };
        let name = s.trim().to_ascii_lowercase();
        if name == "dynamic" {
            return Ok(FlushStrategy::Dynamic);
        }
        let interval = name
            .strip_prefix("timer:")
            .ok_or_else(|| err(FlushReason::Unknown))?;
        let interval = parse_interval(interval.trim()).ok_or_else(|| err(FlushReason::Interval))?;
        if interval.is_zero() {
            return Err(err(FlushReason::ZeroInterval));
        }
        Ok(FlushStrategy::Timer(interval))
    }
}

/// Parses `<number><unit>`, a bare number being milliseconds; `None` if it is not one.
fn parse_interval(s: &str) -> Option<Duration> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "" | "ms" => 1e-3,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(value * seconds).ok()
}

impl Display for FlushStrategy {
    /// `dynamic`, or `timer:` and the interval in the largest unit that writes it exactly
    /// (`timer:100ms`, `timer:2s`, `timer:250us`, `timer:1500ns`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let interval = match self {
            FlushStrategy::Dynamic => return f.write_str("dynamic"),
            FlushStrategy::Timer(interval) => interval.as_nanos(),
        };
        let (value, unit) = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")]
            .into_iter()
            .find(|&(per, _)| interval % per == 0 && interval > 0)
            .map_or((interval, "ns"), |(per, unit)| (interval / per, unit));
        write!(f, "timer:{value}{unit}")
    }
}

/// A string that names no [`FlushStrategy`]; its message says what would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseFlushStrategyError {
    input: String,
    reason: FlushReason,
}

/// What is wrong with a flush strategy's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlushReason {
    /// Neither `dynamic` nor `timer:...`.
    Unknown,
    /// `timer:` followed by something other than an interval.
    Interval,
    /// `timer:0`.
    ZeroInterval,
}

impl Display for ParseFlushStrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        match self.reason {
            FlushReason::Unknown => write!(
                f,
                "`{input}` is not a flush strategy (use dynamic or timer:<interval>, e.g. timer:100ms)"
            ),
            FlushReason::Interval => write!(
                f,
                "`{input}`: the timer's interval must be a number and a unit among ns, us, ms, s, m and h (a bare number is ms), e.g. timer:100ms"
            ),
            FlushReason::ZeroInterval => {
                write!(f, "`{input}`: the timer's interval must be above zero")
            }
        }
    }
}

impl std::error::Error for ParseFlushStrategyError {}

/// `inline`, `typed` or `boxed`; case does not matter.
///
/// ```
/// use zerodispatch_broker::ConfirmMode;
///
/// assert_eq!("typed".parse(), Ok(ConfirmMode::Typed));
/// assert_eq!(ConfirmMode::Boxed.to_string(), "boxed");
/// let err = "carrier-pigeon".parse::<ConfirmMode>().unwrap_err();
/// assert_eq!(err.to_string(), "`carrier-pigeon` is not a confirm mode (use inline, typed or boxed)");
/// ```
impl FromStr for ConfirmMode {
    type Err = ParseConfirmModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "inline" => Ok(ConfirmMode::Inline),
            "typed" => Ok(ConfirmMode::Typed),
            "boxed" => Ok(ConfirmMode::Boxed),
            _ => Err(ParseConfirmModeError {
                input: s.to_owned(),
            }),
        }
    }
}

impl Display for ConfirmMode {
    /// `inline`, `typed` or `boxed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfirmMode::Inline => "inline",
            ConfirmMode::Typed => "typed",
            ConfirmMode::Boxed => "boxed",
        })
    }
}

/// A string that names no [`ConfirmMode`]; its message lists those that exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseConfirmModeError {
    input: String,
}

impl Display for ParseConfirmModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a confirm mode (use inline, typed or boxed)",
            self.input
        )
    }
}

impl std::error::Error for ParseConfirmModeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_strategies_round_trip_through_their_names() {
        for flush in [
            FlushStrategy::Dynamic,
            FlushStrategy::Timer(Duration::from_millis(100)),
            FlushStrategy::Timer(Duration::from_secs(2)),
            FlushStrategy::Timer(Duration::from_micros(250)),
            FlushStrategy::Timer(Duration::from_nanos(1500)),
            FlushStrategy::Timer(Duration::from_nanos(1)),
            FlushStrategy::Timer(Duration::from_secs(3600)),
        ] {
            assert_eq!(flush.to_string().parse(), Ok(flush), "{flush}");
        }
        assert_eq!(
            FlushStrategy::Timer(Duration::from_millis(100)).to_string(),
            "timer:100ms"
        );
        assert_eq!(FlushStrategy::Dynamic.to_string(), "dynamic");
    }

    #[test]
    fn flush_strategies_parse_every_unit_and_bare_milliseconds() {
        let timer = |d| Ok(FlushStrategy::Timer(d));
        assert_eq!("timer:10".parse(), timer(Duration::from_millis(10)));
        assert_eq!("timer:100ms".parse(), timer(Duration::from_millis(100)));
        assert_eq!("TIMER:1.5s".parse(), timer(Duration::from_millis(1500)));
        assert_eq!("timer:250us".parse(), timer(Duration::from_micros(250)));
        assert_eq!("timer:250µs".parse(), timer(Duration::from_micros(250)));
        assert_eq!("timer:900ns".parse(), timer(Duration::from_nanos(900)));
        assert_eq!("timer:2m".parse(), timer(Duration::from_secs(120)));
        assert_eq!("timer:2mins".parse(), timer(Duration::from_secs(120)));
        assert_eq!("timer:1h".parse(), timer(Duration::from_secs(3600)));
        assert_eq!(" Dynamic ".parse(), Ok(FlushStrategy::Dynamic));
    }

    #[test]
    fn bad_flush_strategies_are_errors_that_say_what_to_write() {
        let message = |s: &str| s.parse::<FlushStrategy>().unwrap_err().to_string();
        assert!(message("sometimes").contains("is not a flush strategy (use dynamic or timer"));
        assert!(message("timer").contains("is not a flush strategy"));
        for bad in [
            "timer:",
            "timer:fast",
            "timer:10 parsecs",
            "timer:-5ms",
            "timer:1e99s",
        ] {
            assert!(
                message(bad).contains("must be a number and a unit"),
                "{bad}: {}",
                message(bad)
            );
        }
        assert_eq!(
            message("timer:0"),
            "`timer:0`: the timer's interval must be above zero"
        );
    }

    #[test]
    fn confirm_modes_round_trip_through_their_names() {
        for mode in [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed] {
            assert_eq!(mode.to_string().parse(), Ok(mode), "{mode}");
        }
        assert_eq!("BOXED".parse(), Ok(ConfirmMode::Boxed));
        assert_eq!(
            "".parse::<ConfirmMode>().unwrap_err().to_string(),
            "`` is not a confirm mode (use inline, typed or boxed)"
        );
    }
}
