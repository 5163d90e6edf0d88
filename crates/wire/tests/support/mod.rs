//! The codec tests' fixtures: frames from their fields, raw headers and bodies, the round trip.

#![allow(dead_code)]

pub use zerodispatch_wire::*;

/// `Hello` offering `min_version` to `max_version`.
pub fn hello(min_version: u8, max_version: u8, heartbeat_ms: u32) -> Hello {
    Hello {
        min_version,
        max_version,
        heartbeat_ms,
    }
}

/// `Welcome` at `version`: the `u32` limits in their fields' order, producers and consumers.
pub fn welcome(
    version: u8,
    heartbeat_ms: u32,
    w: [u32; 11],
    producers: u16,
    consumers: u16,
) -> Welcome {
    let limits = ServerLimits {
        max_payload: w[0],
        max_unconfirmed_per_connection: w[1],
        max_unconfirmed_named: w[2],
        consumer_window: w[3],
        queue_slots: w[4],
        max_producers: producers,
        max_consumers: consumers,
        idle_timeout_ms: w[5],
        max_connections: w[6],
        frame_timeout_ms: w[7],
        handshake_timeout_ms: w[8],
        dedup_window: w[9],
        max_new_names: w[10],
    };
    Welcome {
        version,
        heartbeat_ms,
        limits,
    }
}

/// `OpenProducer` of `producer` on `queue`, `max` unconfirmed (anonymous if `name` is empty).
pub fn open_producer(producer: u32, queue: u32, max: u32, name: &str) -> OpenProducer<'_> {
    OpenProducer {
        producer: ProducerId(producer),
        queue: QueueId(queue),
        max_unconfirmed: max,
        name,
    }
}

/// `ProducerOpened` of `producer`, with a window stored from `last` down.
pub fn producer_opened(producer: u32, last: u64, known: u32, bits: &[u8]) -> ProducerOpened<'_> {
    ProducerOpened {
        producer: ProducerId(producer),
        stored: StoredWindow {
            last_stored: Some(last),
            known,
            bits,
        },
    }
}

/// `OpenConsumer` of `consumer` on `app` of `queue`.
pub fn open_consumer(consumer: u32, queue: u32, app: u16, credit: u32) -> OpenConsumer {
    OpenConsumer {
        consumer: ConsumerId(consumer),
        queue: QueueId(queue),
        app: AppId(app),
        credit,
    }
}

/// `CloseProducer` of `producer`.
pub fn close_producer(producer: u32) -> CloseProducer {
    let producer = ProducerId(producer);
    CloseProducer { producer }
}

/// `CloseConsumer` of `consumer`.
pub fn close_consumer(consumer: u32) -> CloseConsumer {
    let consumer = ConsumerId(consumer);
    CloseConsumer { consumer }
}

/// `Credit` of `credit` more messages for `consumer`.
pub fn credit(consumer: u32, credit: u32) -> Credit {
    let consumer = ConsumerId(consumer);
    Credit { consumer, credit }
}

/// An error frame that refuses no frame.
pub fn fatal(code: ErrorCode, message: &str) -> ErrorFrame<'_> {
    ErrorFrame {
        code,
        refused: None,
        subject: 0,
        message,
    }
}

/// `frame`'s bytes.
pub fn encoded(frame: Frame<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    frame.encode(&mut out).expect("a valid frame encodes");
    out
}

/// What `build` writes into an empty buffer.
pub fn built<R>(build: impl FnOnce(&mut Vec<u8>) -> R) -> Vec<u8> {
    let mut out = Vec::new();
    build(&mut out);
    out
}

/// A valid header of `kind` announcing a body of `len` bytes.
pub fn header(kind: FrameKind, len: u32) -> Vec<u8> {
    [
        &[b'Z', b'D', VERSION, kind.as_u8(), 0, 0][..],
        &len.to_le_bytes(),
    ]
    .concat()
}

/// A frame of `kind` with `body` behind a valid header, whatever the body holds.
pub fn frame_of(kind: FrameKind, body: &[u8]) -> Vec<u8> {
    [&header(kind, body.len() as u32)[..], body].concat()
}

/// Appends a `Publish` of `producer` holding `messages` to `out`; returns its length.
pub fn publish<'a>(
    out: &mut Vec<u8>,
    producer: u32,
    messages: impl IntoIterator<Item = (u64, &'a [u8])>,
) -> usize {
    let mut b = PublishBuilder::begin(out, ProducerId(producer));
    for (id, payload) in messages {
        b.push(PublishId(id), payload).unwrap();
    }
    b.finish().unwrap()
}

/// Appends a `PublishConfirm` of `producer` holding `confirms` to `out`; returns its length.
pub fn publish_confirm(
    out: &mut Vec<u8>,
    producer: u32,
    confirms: impl IntoIterator<Item = (u64, ConfirmStatus)>,
) -> usize {
    let mut b = PublishConfirmBuilder::begin(out, ProducerId(producer));
    for (id, status) in confirms {
        b.push(PublishId(id), status).unwrap();
    }
    b.finish().unwrap()
}

/// Appends a `Deliver` to `consumer` of `messages` (GUID, token, payload); returns its length.
pub fn deliver<'a>(
    out: &mut Vec<u8>,
    consumer: u32,
    messages: impl IntoIterator<Item = ([u8; 16], u32, &'a [u8])>,
) -> usize {
    let mut b = DeliverBuilder::begin(out, ConsumerId(consumer));
    for (guid, token, payload) in messages {
        b.push(Guid(guid), DeliveryToken(token), payload).unwrap();
    }
    b.finish().unwrap()
}

/// Appends a `ConsumerConfirm` of `consumer` of `confirms` (GUID, token); returns its length.
pub fn consumer_confirm(
    out: &mut Vec<u8>,
    consumer: u32,
    confirms: impl IntoIterator<Item = ([u8; 16], u32)>,
) -> usize {
    let mut b = ConsumerConfirmBuilder::begin(out, ConsumerId(consumer));
    for (guid, token) in confirms {
        b.push(Guid(guid), DeliveryToken(token)).unwrap();
    }
    b.finish().unwrap()
}

/// The one frame `bytes` hold whole, and the bytes it took.
pub fn decoded(bytes: &[u8]) -> (Frame<'_>, usize) {
    decode(bytes).expect("valid bytes").expect("a whole frame")
}

/// What `decode` answers for a frame of `kind` with `body` behind a valid header.
pub fn decode_body(kind: FrameKind, body: &[u8]) -> Result<(), DecodeError> {
    decode(&frame_of(kind, body)).map(|frame| assert!(frame.is_some(), "{kind:?} whole"))
}

/// Checks that `frame` round-trips (as [`round_trip`]) as the documented `body` behind its header.
pub fn assert_layout(frame: Frame<'_>, body: &[u8]) {
    assert_eq!(round_trip(frame), frame_of(frame.kind(), body), "{frame:?}");
}

/// Encodes `frame` alone and checks that it decodes back, whole and from no shorter prefix.
pub fn round_trip(frame: Frame<'_>) -> Vec<u8> {
    let mut buf = vec![0xAA]; // something of the caller's before the frame, kept
    let written = frame.encode(&mut buf).expect("a valid frame encodes");
    assert_eq!(buf[0], 0xAA);
    let bytes = buf.split_off(1);
    assert_eq!(bytes.len(), written);
    assert_eq!(decode(&bytes), Ok(Some((frame, written))));
    for short in 0..bytes.len() {
        let kind = frame.kind();
        assert_eq!(decode(&bytes[..short]), Ok(None), "{kind:?} cut at {short}");
    }
    bytes
}
