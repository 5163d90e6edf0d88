//! How long a reliable producer or consumer waits between attempts to reconnect:
//! exponential backoff with jitter, bounded.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::error::ClientError;

/// The delays between reconnection attempts: the `n`th attempt after a loss (from 0) waits
/// `min(max, initial * factor^n)`, less a random part of up to `jitter` of it, so that
/// clients that lost their connections together do not come back together. A delay is
/// never over `max`.
///
/// ```
/// use std::time::Duration;
/// use zerodispatch_client::Backoff;
///
/// let backoff = Backoff { jitter: 0.0, ..Backoff::default() };
/// assert_eq!(backoff.delay(0, 0.5), Duration::from_millis(10));
/// assert_eq!(backoff.delay(2, 0.5), Duration::from_millis(40));
/// assert_eq!(backoff.delay(60, 0.5), backoff.max);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first delay (more than zero). Default 10 ms.
    pub initial: Duration,
    /// The longest delay (at least `initial`). Default 2 s.
    pub max: Duration,
    /// What each attempt multiplies the delay by (at least 1). Default 2.
    pub factor: f64,
    /// The part of each delay taken off at random, 0 to 1 (0: none). Default 0.2.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(10),
            max: Duration::from_secs(2),
            factor: 2.0,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    pub(crate) fn check(&self) -> Result<(), ClientError> {
        let invalid = |option, expected| Err(ClientError::InvalidOption { option, expected });
        if self.initial.is_zero() {
            return invalid("backoff.initial", "more than zero");
        }
        if self.max < self.initial {
            return invalid("backoff.max", "at least backoff.initial");
        }
        if !(self.factor >= 1.0 && self.factor.is_finite()) {
            return invalid("backoff.factor", "a finite number of at least 1");
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return invalid("backoff.jitter", "0 to 1");
        }
        Ok(())
    }

    /// The delay before attempt `attempt` (0 for the first after a loss), with `random` in
    /// `0..1` choosing the jitter.
    pub fn delay(&self, attempt: u32, random: f64) -> Duration {
        let max = self.max.as_secs_f64();
        let grown = self.initial.as_secs_f64() * self.factor.powi(attempt.min(1024) as i32);
        let base = if grown.is_finite() {
            grown.min(max)
        } else {
            max
        };
        let jittered = base * (1.0 - self.jitter * random.clamp(0.0, 1.0));
        Duration::from_secs_f64(jittered).min(self.max)
    }
}

/// A small random number generator for the jitter (splitmix64), seeded from the standard
/// library's per-process random hasher keys.
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn new() -> Self {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(0x5A44);
        Self(hasher.finish())
    }

    /// A number in `0..1`.
    pub(crate) fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stay_within_the_bounds() {
        let backoff = Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(300),
            factor: 3.0,
            jitter: 0.5,
        };
        let mut jitter = Jitter::new();
        for attempt in 0..2000 {
            let random = jitter.next();
            assert!((0.0..1.0).contains(&random));
            let full =
                Duration::from_millis(10 * 3_u64.saturating_pow(attempt.min(30))).min(backoff.max);
            let delay = backoff.delay(attempt, random);
            assert!(
                delay <= full && delay >= full / 2,
                "{attempt}: {delay:?} of {full:?}"
            );
        }
        assert_eq!(backoff.delay(0, 0.0), Duration::from_millis(10));
        assert_eq!(backoff.delay(u32::MAX, 0.0), backoff.max);
    }
}
