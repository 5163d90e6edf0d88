//! The names a command line or a configuration file gives the broker's choices:
//! [`FlushStrategy`] and [`ConfirmMode`] implement [`FromStr`] and [`Display`], and
//! `Display` writes what `FromStr` reads back. ([`WaitStrategy`](crate::WaitStrategy)
//! has the same in the core.)

use std::fmt::{self, Display};
use std::str::FromStr;
use std::time::Duration;

use crate::message::ConfirmMode;
use crate::session::FlushStrategy;

/// A duration as every command line of the project writes one: a number and its unit, as
/// the `humantime` crate reads them (`10s`, `500ms`, `250us`, `1.5s`, `2m`, `1m 30s`),
/// blanks around it ignored. A bare number is refused, with a message asking for the unit:
/// it would be ambiguous (seconds to one reader, milliseconds to another). The parser of
/// `timer:<interval>` ([`FlushStrategy`]), the perftest's and `zd-server`'s flags.
///
/// ```
/// use std::time::Duration;
/// use zerodispatch_broker::parse_duration;
///
/// assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
/// let err = parse_duration("500").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "`500` needs a unit: 500s, 500ms or 500us (every duration here is a number and its unit)"
/// );
/// assert!(parse_duration("10 parsecs").unwrap_err().to_string().contains("try 10s, 500ms, 2m"));
/// ```
///
/// # Errors
///
/// [`ParseDurationError`], which says what is wrong.
pub fn parse_duration(s: &str) -> Result<Duration, ParseDurationError> {
    let t = s.trim();
    let err = |reason| ParseDurationError {
        input: s.to_owned(),
        reason,
    };
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(err(DurationReason::BareNumber));
    }
    humantime::parse_duration(t).map_err(|e| err(DurationReason::Invalid(e.to_string())))
}

/// Why [`parse_duration`] refused its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDurationError {
    input: String,
    reason: DurationReason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DurationReason {
    /// A number without its unit.
    BareNumber,
    /// Not a duration, as `humantime` says.
    Invalid(String),
}

impl Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        match &self.reason {
            DurationReason::BareNumber => {
                let t = input.trim();
                write!(
                    f,
                    "`{input}` needs a unit: {t}s, {t}ms or {t}us (every duration here is a number and its unit)"
                )
            }
            DurationReason::Invalid(why) => {
                write!(f, "`{input}` is not a duration ({why}; try 10s, 500ms, 2m)")
            }
        }
    }
}

impl std::error::Error for ParseDurationError {}

/// `dynamic`, or `timer:<interval>`, the interval written as every command line of the
/// project writes a duration: a number and its unit, as the `humantime` crate reads them
/// (`timer:100ms`, `timer:1.5s`, `timer:250us`, `timer:2m`, `timer:1m 30s`). A bare
/// number is refused, with a message asking for the unit: it would be ambiguous
/// (milliseconds here, seconds in `--duration`). The interval must be above zero. Case
/// does not matter.
///
/// ```
/// use std::time::Duration;
/// use zerodispatch_broker::FlushStrategy;
///
/// assert_eq!("dynamic".parse(), Ok(FlushStrategy::Dynamic));
/// assert_eq!("timer:100ms".parse(), Ok(FlushStrategy::Timer(Duration::from_millis(100))));
/// assert_eq!(FlushStrategy::Timer(Duration::from_micros(250)).to_string(), "timer:250us");
/// let err = "timer:100".parse::<FlushStrategy>().unwrap_err();
/// assert_eq!(err.to_string(), "`timer:100`: the timer's interval needs a unit: timer:100ms, timer:100us or timer:100s");
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
        let interval = parse_duration(interval).map_err(|e| match e.reason {
            DurationReason::BareNumber => err(FlushReason::BareNumber),
            DurationReason::Invalid(_) => err(FlushReason::Interval),
        })?;
        if interval.is_zero() {
            return Err(err(FlushReason::ZeroInterval));
        }
        Ok(FlushStrategy::Timer(interval))
    }
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
    /// `timer:` followed by a number without its unit.
    BareNumber,
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
                "`{input}`: the timer's interval must be a number and a unit (ns, us, ms, s, m, h), e.g. timer:100ms"
            ),
            FlushReason::BareNumber => {
                let number = input.trim().get("timer:".len()..).unwrap_or("").trim();
                write!(
                    f,
                    "`{input}`: the timer's interval needs a unit: timer:{number}ms, timer:{number}us or timer:{number}s"
                )
            }
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
    use std::time::Duration;

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
    fn flush_strategies_parse_every_unit() {
        let timer = |d| Ok(FlushStrategy::Timer(d));
        assert_eq!("timer:10ms".parse(), timer(Duration::from_millis(10)));
        assert_eq!("timer:1m 30s".parse(), timer(Duration::from_secs(90)));
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
        // Each of `bad` refused with a message that says `why`.
        let refused = |bad: &[&str], why: &str| {
            for bad in bad {
                assert!(message(bad).contains(why), "{bad}: {}", message(bad));
            }
        };
        refused(
            &[
                "timer:",
                "timer:fast",
                "timer:10 parsecs",
                "timer:-5ms",
                "timer:1e99s",
            ],
            "must be a number and a unit",
        );
        assert_eq!(
            message("timer:0ms"),
            "`timer:0ms`: the timer's interval must be above zero"
        );
        // A bare number is ambiguous: refused, with the unit to add.
        refused(
            &["timer:10", "timer:0", "timer:1.5", " timer: 100 "],
            "the timer's interval needs a unit: timer:",
        );
        assert_eq!(
            message("timer:10"),
            "`timer:10`: the timer's interval needs a unit: timer:10ms, timer:10us or timer:10s"
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
