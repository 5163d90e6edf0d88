//! Preallocated tables. Every table of a queue or session is allocated once, when the
//! queue or session is created, with `try_reserve_exact` (`try_reserve` for a map), so that
//! a size the machine cannot provide comes back as an error from `Broker::start` or
//! `open_*`, never as an abort on the allocation.

use std::collections::{HashMap, TryReserveError, VecDeque};
use std::hash::{BuildHasher, Hash};

/// An empty vector with room for `n` elements.
pub(crate) fn vec<T>(n: usize) -> Result<Vec<T>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    Ok(v)
}

/// A vector of `n` copies of `fill`.
pub(crate) fn filled<T: Clone>(n: usize, fill: T) -> Result<Vec<T>, TryReserveError> {
    let mut v = vec(n)?;
    v.resize(n, fill);
    Ok(v)
}

/// An empty double-ended queue with room for `n` elements.
pub(crate) fn deque<T>(n: usize) -> Result<VecDeque<T>, TryReserveError> {
    let mut d = VecDeque::new();
    d.try_reserve_exact(n)?;
    Ok(d)
}

/// An empty map with room for `n` entries.
pub(crate) fn map<K: Eq + Hash, V, S: BuildHasher + Default>(
    n: usize,
) -> Result<HashMap<K, V, S>, TryReserveError> {
    let mut m = HashMap::with_hasher(S::default());
    m.try_reserve(n)?;
    Ok(m)
}
