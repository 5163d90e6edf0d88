//! The codec over generated input: frames round-trip, split anywhere; hostile bytes never panic.

use proptest::prelude::*;
mod support;

use support::*;

/// A frame with owned contents (a fixed frame's borrowed contents leaked for the test).
#[derive(Clone, Debug, PartialEq)]
enum Model {
    Fixed(Frame<'static>),
    Publish(u32, Vec<(u64, Vec<u8>)>),
    PublishConfirm(u32, Vec<(u64, ConfirmStatus)>),
    Deliver(u32, Vec<([u8; 16], u32, Vec<u8>)>),
    ConsumerConfirm(u32, Vec<([u8; 16], u32)>),
}

impl Model {
    fn encode(&self, out: &mut Vec<u8>) -> usize {
        match self {
            Self::Fixed(frame) => frame.encode(out).unwrap(),
            Self::Publish(p, messages) => {
                publish(out, *p, messages.iter().map(|(id, m)| (*id, &m[..])))
            }
            Self::PublishConfirm(p, confirms) => publish_confirm(out, *p, confirms.iter().copied()),
            Self::Deliver(c, messages) => {
                deliver(out, *c, messages.iter().map(|(g, t, m)| (*g, *t, &m[..])))
            }
            Self::ConsumerConfirm(c, confirms) => {
                consumer_confirm(out, *c, confirms.iter().copied())
            }
        }
    }

    /// The model of a decoded frame, iterating every batch to its end.
    fn of(frame: Frame<'_>) -> Self {
        let count = |n: usize, count: u32| assert_eq!(n, count as usize);
        match frame {
            Frame::OpenProducer(f) => Self::Fixed(Frame::OpenProducer(OpenProducer {
                name: f.name.to_owned().leak(),
                ..f
            })),
            Frame::ProducerOpened(f) => Self::Fixed(Frame::ProducerOpened(ProducerOpened {
                producer: f.producer,
                stored: StoredWindow {
                    bits: f.stored.bits.to_vec().leak(),
                    ..f.stored
                },
            })),
            Frame::Error(e) => Self::Fixed(Frame::Error(ErrorFrame {
                message: e.message.to_owned().leak(),
                ..e
            })),
            Frame::Publish(b) => {
                let messages: Vec<_> = b.messages().map(|(id, p)| (id.0, p.to_vec())).collect();
                count(messages.len(), b.count());
                Self::Publish(b.producer().0, messages)
            }
            Frame::PublishConfirm(b) => {
                let confirms: Vec<_> = b.confirms().map(|(id, s)| (id.0, s)).collect();
                count(confirms.len(), b.count());
                Self::PublishConfirm(b.producer().0, confirms)
            }
            Frame::Deliver(b) => {
                let messages = b.messages().map(|(g, t, p)| (g.0, t.0, p.to_vec()));
                let messages: Vec<_> = messages.collect();
                count(messages.len(), b.count());
                Self::Deliver(b.consumer().0, messages)
            }
            Frame::ConsumerConfirm(b) => {
                let confirms: Vec<_> = b.deliveries().map(|(g, t)| (g.0, t.0)).collect();
                count(confirms.len(), b.count());
                Self::ConsumerConfirm(b.consumer().0, confirms)
            }
            Frame::Hello(f) => Self::Fixed(Frame::Hello(f)),
            Frame::Welcome(f) => Self::Fixed(Frame::Welcome(f)),
            Frame::Heartbeat => Self::Fixed(Frame::Heartbeat),
            Frame::CloseProducer(f) => Self::Fixed(Frame::CloseProducer(f)),
            Frame::OpenConsumer(f) => Self::Fixed(Frame::OpenConsumer(f)),
            Frame::CloseConsumer(f) => Self::Fixed(Frame::CloseConsumer(f)),
            Frame::Credit(f) => Self::Fixed(Frame::Credit(f)),
        }
    }
}

fn status() -> impl Strategy<Value = ConfirmStatus> {
    proptest::sample::select(&ConfirmStatus::ALL[..])
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..48)
}

fn fixed() -> impl Strategy<Value = Frame<'static>> {
    let hellos = (1_u8..=255, any::<u8>(), any::<u32>());
    let welcomes = (1_u8..=255, any::<(u32, [u32; 11], u16, u16)>());
    let openeds = (any::<u32>(), any::<u64>(), 0_u32..=40, any::<u64>());
    let open_consumers = (any::<u32>(), any::<u32>(), any::<u16>(), any::<u32>());
    prop_oneof![
        hellos.prop_map(|(min, extra, heartbeat_ms)| {
            let max_version = min.saturating_add(extra % 4);
            Frame::Hello(hello(min, max_version, heartbeat_ms))
        }),
        welcomes.prop_map(|(v, (ms, w, p, c))| Frame::Welcome(welcome(v, ms, w, p, c))),
        Just(Frame::Heartbeat),
        openeds.prop_map(|(p, last, known, bits)| {
            // A valid window: `known` <= `last + 1`, the highest's bit set, none past `known`.
            let known = u64::from(known).min(last.saturating_add(1)) as u32;
            if known == 0 {
                let (producer, stored) = (ProducerId(p), StoredWindow::NOTHING);
                return Frame::ProducerOpened(ProducerOpened { producer, stored });
            }
            let bits = (bits & (u64::MAX >> (64 - known.min(40)))) | 1;
            let bytes = bits.to_le_bytes()[..known.div_ceil(8) as usize].to_vec();
            Frame::ProducerOpened(producer_opened(p, last, known, bytes.leak()))
        }),
        any::<u32>().prop_map(|p| Frame::CloseProducer(close_producer(p))),
        open_consumers.prop_map(|(c, q, a, n)| Frame::OpenConsumer(open_consumer(c, q, a, n))),
        any::<u32>().prop_map(|c| Frame::CloseConsumer(close_consumer(c))),
        (any::<u32>(), 1_u32..).prop_map(|(c, n)| Frame::Credit(credit(c, n))),
    ]
}

fn model() -> impl Strategy<Value = Model> {
    use prop::collection::vec;
    // Names of up to 60 characters of any width: up to 240 bytes, within the limit.
    let opens = (any::<u32>(), any::<u32>(), 1_u32.., ".{0,60}");
    let refused = prop::option::of(prop::sample::select(FrameKind::ALL.to_vec()));
    let errors = (any::<u16>(), refused, any::<u32>(), ".{0,40}");
    let publishes = (any::<u32>(), vec((any::<u64>(), payload()), 1..12));
    let publish_confirms = (any::<u32>(), vec((any::<u64>(), status()), 1..24));
    let delivers = (
        any::<u32>(),
        vec((any::<[u8; 16]>(), any::<u32>(), payload()), 1..12),
    );
    let consumer_confirms = (any::<u32>(), vec((any::<[u8; 16]>(), any::<u32>()), 1..24));
    prop_oneof![
        fixed().prop_map(Model::Fixed),
        opens.prop_map(|(p, q, max, name)| {
            Model::Fixed(Frame::OpenProducer(open_producer(p, q, max, name.leak())))
        }),
        errors.prop_map(|(code, refused, subject, message)| {
            let error = fatal(ErrorCode(code), message.leak());
            Model::Fixed(Frame::Error(ErrorFrame {
                refused,
                subject,
                ..error
            }))
        }),
        publishes.prop_map(|(p, messages)| Model::Publish(p, messages)),
        publish_confirms.prop_map(|(p, confirms)| Model::PublishConfirm(p, confirms)),
        delivers.prop_map(|(c, messages)| Model::Deliver(c, messages)),
        consumer_confirms.prop_map(|(c, confirms)| Model::ConsumerConfirm(c, confirms)),
    ]
}

/// Decodes a hostile peer's `bytes`: an accepted frame encodes back to the bytes consumed.
fn decode_hostile(bytes: &[u8]) -> Result<(), TestCaseError> {
    match decode(bytes) {
        Ok(None) | Err(_) => {}
        Ok(Some((frame, consumed))) => {
            prop_assert!(consumed <= bytes.len());
            prop_assert!(consumed >= HEADER_LEN);
            let _ = Model::of(frame); // every batch iterates to its end
            let again = built(|out| frame.encode(out).expect("an accepted frame encodes"));
            prop_assert_eq!(&again[..], &bytes[..consumed]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_encoded_frame_decodes_to_itself(model in model()) {
        let buf = built(|out| model.encode(out));
        let (frame, consumed) = decode(&buf).unwrap().expect("a whole frame");
        prop_assert_eq!(consumed, buf.len());
        prop_assert_eq!(Model::of(frame), model);
        prop_assert_eq!(built(|out| frame.encode(out).unwrap()), buf);
    }

    #[test]
    fn a_stream_split_anywhere_decodes_to_the_same_frames(
        models in prop::collection::vec(model(), 1..8),
        chunks in prop::collection::vec(1_usize..96, 0..64),
    ) {
        let stream = built(|out| models.iter().map(|m| m.encode(out)).sum::<usize>());
        // The receiver's buffer: what arrived and was not decoded yet.
        let mut pending = Vec::new();
        let mut decoded = Vec::new();
        let mut sent = 0_usize;
        let sizes = chunks.into_iter().chain(std::iter::once(usize::MAX));
        for size in sizes {
            let end = stream.len().min(sent.saturating_add(size));
            pending.extend_from_slice(&stream[sent..end]);
            sent = end;
            let mut start = 0;
            while let Some((frame, consumed)) = decode(&pending[start..]).unwrap() {
                decoded.push(Model::of(frame));
                start += consumed;
            }
            pending.drain(..start);
            if sent == stream.len() {
                break;
            }
        }
        prop_assert!(pending.is_empty());
        prop_assert_eq!(decoded, models);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        decode_hostile(&bytes)?;
    }

    #[test]
    fn a_random_body_behind_a_valid_header_never_panics_the_decoder(
        kind in prop::sample::select(FrameKind::ALL.to_vec()),
        body in prop::collection::vec(any::<u8>(), 0..256),
        extra in 0_usize..4,
    ) {
        let mut bytes = frame_of(kind, &body);
        bytes.extend(std::iter::repeat_n(0x5a, extra)); // the start of the next frame
        decode_hostile(&bytes)?;
        prop_assert!(decode(&bytes) != Ok(None), "a whole frame is decoded or refused");
    }

    #[test]
    fn a_valid_frame_with_a_byte_changed_never_panics_the_decoder(
        model in model(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = built(|out| model.encode(out));
        let at = at.index(bytes.len());
        bytes[at] = byte;
        decode_hostile(&bytes)?;
        decode_hostile(&bytes[..cut.index(bytes.len() + 1)])?;
    }
}
