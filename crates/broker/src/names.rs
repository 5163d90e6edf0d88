//! The broker's table of producer names, and the ids they stand for.
//!
//! A named producer's [`ProducerId`] is its name's index in this table, fixed for the
//! broker's life: a producer that reopens under the same name (after a lost connection, say)
//! gets the same id, so its messages get the same GUIDs, and each queue can tell a message
//! it has stored already (see `dedup.rs`). The table is bounded
//! ([`BrokerConfig::max_producer_names`](crate::BrokerConfig::max_producer_names)) and
//! preallocated; it is consulted under a mutex when a producer opens or closes and when
//! [`Broker::stored_window`](crate::Broker::stored_window) (or `last_stored`) is asked, and
//! on the message path in one rare case only: a queue asks which of two producers of a name
//! is the newer when both published a message still waiting for its replication quorum.
//!
//! A name is never forgotten while the broker runs: its entry, and every queue's record of
//! what it has stored, stay after its producer closes, so that the next producer of that
//! name is deduplicated against it. Once the table holds `max_producer_names` names, a new
//! name is refused ([`BrokerError::TooManyNames`]); names already in it may still be opened.

use std::collections::{HashMap, TryReserveError};

use zerodispatch_core::ClientHandle;

use crate::error::BrokerError;
use crate::ids::ProducerId;
use crate::tables;

/// The names and their ids, which are held by a producer now, and each one's newest
/// producer.
#[derive(Debug)]
pub(crate) struct Names {
    ids: HashMap<Box<str>, ProducerId>,
    /// By id: whether a producer holds the name now.
    open: Vec<bool>,
    /// By id: the session of the name's newest producer, once it has one (set when its
    /// open succeeds, kept after its close). A queue asks which of two sessions of a name
    /// is the newer (`is_newest`), on a rare path only.
    newest: Vec<Option<ClientHandle>>,
    capacity: usize,
}

impl Names {
    /// An empty table with room for `capacity` names.
    pub(crate) fn new(capacity: usize) -> Result<Self, TryReserveError> {
        let mut ids = HashMap::new();
        ids.try_reserve(capacity)?;
        Ok(Self {
            ids,
            open: tables::vec(capacity)?,
            newest: tables::vec(capacity)?,
            capacity,
        })
    }

    /// The id of `name`, if it was ever opened.
    pub(crate) fn find(&self, name: &str) -> Option<ProducerId> {
        self.ids.get(name).copied()
    }

    /// Marks `name` open, adding it if it is new, and returns its id.
    ///
    /// # Errors
    ///
    /// `NameInUse` if a producer holds it; `TooManyNames` if it is new and the table is
    /// full.
    pub(crate) fn open(&mut self, name: &str) -> Result<ProducerId, BrokerError> {
        if let Some(id) = self.find(name) {
            let open = &mut self.open[id.0 as usize];
            if *open {
                return Err(BrokerError::NameInUse(name.into()));
            }
            *open = true;
            return Ok(id);
        }
        if self.open.len() >= self.capacity {
            return Err(BrokerError::TooManyNames {
                max_producer_names: self.capacity,
            });
        }
        // Below `capacity`, at most MAX_PRODUCER_NAMES: fits a `u32`.
        let id = ProducerId(self.open.len() as u32);
        self.ids.insert(name.into(), id);
        self.open.push(true);
        self.newest.push(None);
        Ok(id)
    }

    /// Records `session` as the session of the newest producer of name `id`: opened after
    /// every other producer of the name.
    pub(crate) fn opened(&mut self, id: ProducerId, session: ClientHandle) {
        if let Some(newest) = self.newest.get_mut(id.0 as usize) {
            *newest = Some(session);
        }
    }

    /// Whether `session` is the session of the newest producer of name `id`: then every
    /// other session of the name is older, and closed.
    pub(crate) fn is_newest(&self, id: ProducerId, session: ClientHandle) -> bool {
        self.newest.get(id.0 as usize) == Some(&Some(session))
    }

    /// Frees the name of producer `id` for the next producer of that name.
    pub(crate) fn close(&mut self, id: ProducerId) {
        if let Some(open) = self.open.get_mut(id.0 as usize) {
            *open = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_id_across_opens_and_a_full_table_refuses_only_new_names() {
        let mut names = Names::new(2).unwrap();
        let a = names.open("a").unwrap();
        assert!(matches!(names.open("a"), Err(BrokerError::NameInUse(n)) if &*n == "a"));
        let b = names.open("b").unwrap();
        assert_ne!(a, b);
        assert!(matches!(
            names.open("c"),
            Err(BrokerError::TooManyNames {
                max_producer_names: 2
            })
        ));
        names.close(a);
        assert_eq!(names.open("a").unwrap(), a);
        assert_eq!(names.find("b"), Some(b));
        assert_eq!(names.find("c"), None);
    }
}
