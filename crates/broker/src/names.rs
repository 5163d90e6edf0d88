//! The broker's table of producer names, and the ids they stand for.
//!
//! A named producer's [`ProducerId`] is its name's place in this table, and the place's
//! generation goes into its GUIDs ([`Guid::generation`](crate::Guid::generation)). A
//! producer that reopens under a name the table still holds (after a lost connection, say)
//! gets the same id and generation, so its messages get the same GUIDs, and each queue
//! can tell a message it has stored already (see `dedup.rs`).
//!
//! The table is bounded ([`BrokerConfig::max_producer_names`](crate::BrokerConfig::max_producer_names))
//! and preallocated. A name stays while the table has room. When a new name finds it
//! full, the name closed least recently gives up its place: the new name takes it with
//! the next generation, so no GUID of the old name's messages (some may still be in a
//! queue) is ever made again, and each queue starts the place's record afresh when the
//! first message of the new generation comes. A name held by an open producer is never
//! given up: only when every place is held is a new name refused
//! ([`BrokerError::TooManyNames`]). A place whose generation reached `u32::MAX` is retired
//! rather than wrapped.
//!
//! The table is consulted under a mutex when a producer opens or closes and when
//! [`Broker::stored_window`](crate::Broker::stored_window) is asked, and on the message
//! path in one rare case only: a queue asks which of two producers of a name is the newer
//! when both published a message still waiting for its replication quorum.

use std::collections::{HashMap, TryReserveError};

use zerodispatch_core::ClientHandle;

use crate::error::BrokerError;
use crate::ids::{ProducerId, ProducerKey};
use crate::tables;

/// No place: the end of the list of closed places.
const NONE: u32 = u32::MAX;

/// One place of the table.
#[derive(Debug)]
struct Place {
    /// The name that holds the place.
    name: Box<str>,
    generation: u32,
    /// Whether a producer holds the name now.
    open: bool,
    /// The session of the name's newest producer, once it has one (set when its open
    /// succeeds, kept after its close). A queue asks which of two sessions of a name is the
    /// newer (`is_newest`), on a rare path only.
    newest: Option<ClientHandle>,
    /// Neighbours in the list of closed places, least recently closed first (`NONE` at
    /// either end); meaningful while the place is closed.
    older: u32,
    newer: u32,
}

/// The names, their places and generations, which are held by a producer now, and each
/// one's newest producer.
#[derive(Debug)]
pub(crate) struct Names {
    ids: HashMap<Box<str>, u32>,
    places: Vec<Place>,
    /// The list of closed places that may be given up, least recently closed first.
    oldest_closed: u32,
    newest_closed: u32,
    capacity: usize,
}

impl Names {
    /// An empty table with room for `capacity` names.
    pub(crate) fn new(capacity: usize) -> Result<Self, TryReserveError> {
        let mut ids = HashMap::new();
        ids.try_reserve(capacity)?;
        Ok(Self {
            ids,
            places: tables::vec(capacity)?,
            oldest_closed: NONE,
            newest_closed: NONE,
            capacity,
        })
    }

    /// The id and generation of `name`, if the table holds it.
    pub(crate) fn find(&self, name: &str) -> Option<ProducerKey> {
        let place = *self.ids.get(name)?;
        Some(self.name_id(place))
    }

    /// Marks `name` open and returns its id: its own if the table holds it; else a new
    /// place, or the place of the name closed least recently, with the next generation.
    ///
    /// # Errors
    ///
    /// `NameInUse` if a producer holds it; `TooManyNames` if it is new and every place is
    /// held by an open producer (or retired).
    pub(crate) fn open(&mut self, name: &str) -> Result<ProducerKey, BrokerError> {
        if let Some(&place) = self.ids.get(name) {
            if self.places[place as usize].open {
                return Err(BrokerError::NameInUse(name.into()));
            }
            self.unlink(place);
            self.places[place as usize].open = true;
            return Ok(self.name_id(place));
        }
        let place = if self.places.len() < self.capacity {
            // Below `capacity`, at most MAX_PRODUCER_NAMES: fits a `u32` below `NONE`.
            self.places.push(Place {
                name: name.into(),
                generation: 0,
                open: true,
                newest: None,
                older: NONE,
                newer: NONE,
            });
            self.places.len() as u32 - 1
        } else {
            self.give_up_oldest(name)?
        };
        self.ids.insert(name.into(), place);
        Ok(self.name_id(place))
    }

    /// Gives the place of the name closed least recently to `name`, at the next generation.
    fn give_up_oldest(&mut self, name: &str) -> Result<u32, BrokerError> {
        let place = self.oldest_closed;
        if place == NONE {
            return Err(BrokerError::TooManyNames {
                max_producer_names: self.capacity,
            });
        }
        self.unlink(place);
        let old = &mut self.places[place as usize];
        // Only places below `u32::MAX` are ever linked (`close`).
        old.generation += 1;
        old.open = true;
        old.newest = None;
        let old_name = std::mem::replace(&mut old.name, name.into());
        self.ids.remove(&old_name);
        Ok(place)
    }

    /// Records `session` as the session of the newest producer of name `id`: opened after
    /// every other producer of the name.
    pub(crate) fn opened(&mut self, id: ProducerId, session: ClientHandle) {
        if let Some(place) = self.places.get_mut(id.0 as usize) {
            place.newest = Some(session);
        }
    }

    /// Whether `session` is the session of the newest producer of name `id`: then every
    /// other session of the name is older, and closed.
    pub(crate) fn is_newest(&self, id: ProducerId, session: ClientHandle) -> bool {
        self.places
            .get(id.0 as usize)
            .is_some_and(|place| place.newest == Some(session))
    }

    /// Frees the name of producer `id` for the next producer of that name, and makes its
    /// place the last to be given up to a new name.
    pub(crate) fn close(&mut self, id: ProducerId) {
        let index = id.0;
        let Some(place) = self.places.get_mut(index as usize) else {
            return;
        };
        if !place.open {
            return;
        }
        place.open = false;
        if place.generation == u32::MAX {
            // Retired: no next generation to give.
            return;
        }
        place.older = self.newest_closed;
        place.newer = NONE;
        match self.newest_closed {
            NONE => self.oldest_closed = index,
            newest => self.places[newest as usize].newer = index,
        }
        self.newest_closed = index;
    }

    /// Takes closed place `index` out of the list (if it is in it).
    fn unlink(&mut self, index: u32) {
        let Place { older, newer, .. } = self.places[index as usize];
        let linked = older != NONE || newer != NONE || self.oldest_closed == index;
        if !linked {
            return;
        }
        match older {
            NONE => self.oldest_closed = newer,
            older => self.places[older as usize].newer = newer,
        }
        match newer {
            NONE => self.newest_closed = older,
            newer => self.places[newer as usize].older = older,
        }
        let place = &mut self.places[index as usize];
        (place.older, place.newer) = (NONE, NONE);
    }

    fn name_id(&self, place: u32) -> ProducerKey {
        ProducerKey {
            id: ProducerId(place),
            generation: self.places[place as usize].generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(names: &mut Names, name: &str) -> ProducerKey {
        names.open(name).unwrap()
    }

    #[test]
    fn a_name_keeps_its_id_across_opens_and_a_full_table_refuses_only_while_every_name_is_open() {
        let mut names = Names::new(2).unwrap();
        let a = open(&mut names, "a");
        assert!(matches!(names.open("a"), Err(BrokerError::NameInUse(n)) if &*n == "a"));
        let b = open(&mut names, "b");
        assert_ne!(a.id, b.id);
        assert!(matches!(
            names.open("c"),
            Err(BrokerError::TooManyNames {
                max_producer_names: 2
            })
        ));
        names.close(a.id);
        assert_eq!(open(&mut names, "a"), a);
        assert_eq!(names.find("b"), Some(b));
        assert_eq!(names.find("c"), None);
    }

    #[test]
    fn a_new_name_takes_the_place_of_the_name_closed_least_recently_at_the_next_generation() {
        let mut names = Names::new(3).unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|n| open(&mut names, n));
        names.close(b.id);
        names.close(a.id);
        names.close(c.id);
        // Reopened, `a` is no longer closed: `b` then `c` go first.
        assert_eq!(open(&mut names, "a"), a);
        let d = open(&mut names, "d");
        assert_eq!((d.id, d.generation), (b.id, 1));
        assert_eq!(names.find("b"), None);
        let e = open(&mut names, "e");
        assert_eq!((e.id, e.generation), (c.id, 1));
        // Every place is held now.
        assert!(matches!(
            names.open("f"),
            Err(BrokerError::TooManyNames { .. })
        ));
        // A name given up comes back as a new one, at the next generation of some place.
        names.close(d.id);
        let b_again = open(&mut names, "b");
        assert_eq!((b_again.id, b_again.generation), (b.id, 2));
    }

    #[test]
    fn a_place_at_the_last_generation_is_retired_not_wrapped() {
        let mut names = Names::new(1).unwrap();
        let a = open(&mut names, "a");
        names.places[a.id.0 as usize].generation = u32::MAX - 1;
        names.close(a.id);
        let b = open(&mut names, "b");
        assert_eq!(b.generation, u32::MAX);
        names.close(b.id);
        assert!(matches!(
            names.open("c"),
            Err(BrokerError::TooManyNames { .. })
        ));
        // The retired name itself may still be opened.
        assert_eq!(open(&mut names, "b"), b);
    }

    #[test]
    fn a_closed_name_is_given_up_once_and_a_double_close_changes_nothing() {
        let mut names = Names::new(2).unwrap();
        let a = open(&mut names, "a");
        let b = open(&mut names, "b");
        names.close(a.id);
        names.close(a.id);
        let c = open(&mut names, "c");
        assert_eq!(c.id, a.id);
        assert!(matches!(
            names.open("d"),
            Err(BrokerError::TooManyNames { .. })
        ));
        assert_eq!(names.find("b"), Some(b));
    }
}
