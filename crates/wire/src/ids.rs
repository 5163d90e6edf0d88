//! The ids a frame carries: plain integers and bytes, with the broker's meaning documented
//! on each (the mapping is in `docs/protocol.md`, "Ids and statuses").
//!
//! The codec defines its own types rather than borrowing the broker's, so that it depends
//! on nothing; each converts to the broker's type of the same name by its field.

use std::fmt;

/// A queue's id: the broker's `QueueId`, the same `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

/// A sub-queue (app) id: the broker's `AppId`, the same `u16`. App 0 is a priority queue's
/// only app.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub u16);

/// A producer's id on one connection: chosen by the client in `OpenProducer`, unique among
/// the producers open on that connection, and named by each `Publish` and
/// `PublishConfirm` of the producer.
///
/// It is not the broker's `ProducerId`: the broker maps (connection, this id) to a producer
/// of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub u32);

/// A consumer's id on one connection: chosen by the client in `OpenConsumer`, unique among
/// the consumers open on that connection, and named by each `Deliver`, `ConsumerConfirm`
/// and `Credit` of the consumer.
///
/// It is not the broker's `ConsumerId`: the broker maps (connection, this id) to a consumer
/// of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerId(pub u32);

/// A message's publishing id: a sequence number the producer assigns to each message it
/// publishes, and which the broker's confirm of that message carries back. The protocol
/// does not require the ids to be consecutive or unique; a producer that makes them so can
/// match each confirm to its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublishId(pub u64);

/// A message's 16-byte GUID, assigned by the broker: the broker's `Guid`, the same bytes.
/// A consumer confirms a delivered message by its GUID and its [`DeliveryToken`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guid(pub [u8; 16]);

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Guid(")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        f.write_str(")")
    }
}

/// A delivery's token: chosen by the broker for one delivery of one message to one
/// consumer on one connection, carried by that message's entry in `Deliver`, and echoed,
/// with the message's GUID, by the consumer's confirm of it in `ConsumerConfirm`.
///
/// Opaque to the client, which neither interprets nor invents one: it echoes the pair it
/// was delivered. The broker checks a token against the GUID it came with: a confirm whose
/// token names no delivery the consumer holds under that GUID (unknown, stale, another
/// consumer's) confirms nothing and is refused (`docs/protocol.md`, "Consumer confirms").
/// A token is worth nothing on another connection, nor after the message is delivered
/// again: confirm a redelivery with the token it came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryToken(pub u32);
