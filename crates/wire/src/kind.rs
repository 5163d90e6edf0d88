//! A frame's kind, the header's fourth byte: which layout the body has.
//!
//! Its own module, below the header and the errors alike, since both name it.

/// A frame's kind: the header's fourth byte. The direction each kind travels in is part
/// of the protocol (`docs/protocol.md`); the codec encodes and decodes every kind either
/// way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Client -> broker, first frame: the versions the client speaks.
    Hello = 0x01,
    /// Broker -> client, answer to `Hello`: the version chosen.
    Welcome = 0x02,
    /// Either way: "still here", when nothing else was sent for a heartbeat interval.
    Heartbeat = 0x03,
    /// Either way: an error code, what it concerns, and a message.
    Error = 0x04,
    /// Client -> broker: open a producer on a queue, anonymous or named (answered by
    /// `ProducerOpened` once open).
    OpenProducer = 0x10,
    /// Client -> broker: close a producer (echoed by the broker once closed).
    CloseProducer = 0x11,
    /// Client -> broker: a batch of messages of one producer.
    Publish = 0x12,
    /// Broker -> client: the outcomes of a batch of a producer's messages.
    PublishConfirm = 0x13,
    /// Broker -> client, answer to `OpenProducer`: the producer is open, and the highest
    /// publish id its queue has stored for its name.
    ProducerOpened = 0x14,
    /// Client -> broker: open a consumer of an app of a queue (echoed once open).
    OpenConsumer = 0x20,
    /// Client -> broker: close a consumer (echoed by the broker once closed).
    CloseConsumer = 0x21,
    /// Broker -> client: a batch of messages for one consumer.
    Deliver = 0x22,
    /// Client -> broker: a consumer has processed a batch of delivered messages.
    ConsumerConfirm = 0x23,
    /// Client -> broker: a consumer may be sent more messages.
    Credit = 0x24,
}

impl FrameKind {
    /// Every kind, in the order of their bytes.
    pub const ALL: [Self; 14] = [
        Self::Hello,
        Self::Welcome,
        Self::Heartbeat,
        Self::Error,
        Self::OpenProducer,
        Self::CloseProducer,
        Self::Publish,
        Self::PublishConfirm,
        Self::ProducerOpened,
        Self::OpenConsumer,
        Self::CloseConsumer,
        Self::Deliver,
        Self::ConsumerConfirm,
        Self::Credit,
    ];

    /// The kind a byte stands for, or `None` for a byte no kind has.
    ///
    /// ```
    /// use zerodispatch_wire::FrameKind;
    /// assert_eq!(FrameKind::from_u8(0x12), Some(FrameKind::Publish));
    /// assert_eq!(FrameKind::from_u8(0), None);
    /// ```
    #[must_use]
    pub fn from_u8(byte: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_u8() == byte)
    }

    /// The byte that stands for this kind.
    #[must_use]
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}
