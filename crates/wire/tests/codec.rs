//! The codec frame by frame: round trips, the documented layouts, each bad input's own error.

mod support;

use support::*;

#[test]
fn fixed_frames_round_trip_in_their_documented_layout() {
    assert_layout(Frame::Hello(hello(1, 3, 0x0102_0304)), &[1, 3, 4, 3, 2, 1]);
    let limits = [4096, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13];
    assert_layout(
        Frame::Welcome(welcome(1, 5000, limits, 6, 7)),
        &[
            1, 0x88, 0x13, 0, 0, // version, heartbeat_ms
            0, 0x10, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, // u32 limits
            6, 0, 7, 0, // producers, consumers
            8, 0, 0, 0, 9, 0, 0, 0, // idle timeout, connections
            10, 0, 0, 0, 11, 0, 0, 0, // frame and handshake timeouts
            12, 0, 0, 0, 13, 0, 0, 0, // dedup window, new names
        ],
    );
    assert_eq!(round_trip(Frame::Heartbeat), b"ZD\x05\x03\0\0\0\0\0\0");

    let open = open_producer(1, 2, 3, "");
    let named = OpenProducer { name: "ab", ..open };
    let opened = producer_opened(1, 0x0102, 3, &[0b101]);
    let none = ProducerOpened {
        stored: StoredWindow::NOTHING,
        ..opened
    };
    let body = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0];
    assert_layout(Frame::OpenProducer(open), &body);
    let body = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2, b'a', b'b'];
    assert_layout(Frame::OpenProducer(named), &body);
    let body = [1, 0, 0, 0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0b101];
    assert_layout(Frame::ProducerOpened(opened), &body);
    let body = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_layout(Frame::ProducerOpened(none), &body);
    let body = [0x0d, 0x0c, 0x0b, 0x0a];
    assert_layout(Frame::CloseProducer(close_producer(0x0a0b_0c0d)), &body);
    let body = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0];
    assert_layout(Frame::OpenConsumer(open_consumer(1, 2, 3, 0)), &body);
    assert_layout(Frame::CloseConsumer(close_consumer(9)), &[9, 0, 0, 0]);
    assert_layout(Frame::Credit(credit(9, 256)), &[9, 0, 0, 0, 0, 1, 0, 0]);
    let stored = [0x0102, 0x0101, 0x0100, 0x00ff].map(|id| opened.stored.stored(id));
    let expected = [Some(true), Some(false), Some(true), None];
    assert_eq!(stored, expected, "0x00ff: older than the window");
    assert_eq!(none.stored.stored(0), Some(false));
    // u64::MAX is an id like any other: "nothing stored" is the flag, not a value.
    let max = producer_opened(1, u64::MAX, 1, &[1]);
    assert_eq!(round_trip(Frame::ProducerOpened(max)).len(), 28);
    assert_eq!(max.stored.stored(u64::MAX), Some(true));
}

#[test]
fn error_frames_round_trip_with_and_without_a_subject() {
    let refusal = ErrorFrame {
        code: ErrorCode::UNKNOWN_QUEUE,
        refused: Some(FrameKind::OpenProducer),
        subject: 7,
        message: "queue 12 does not exist",
    };
    let bytes = round_trip(Frame::Error(refusal));
    let mut body = vec![100, 0, 0x10, 7, 0, 0, 0, 23, 0];
    body.extend_from_slice(b"queue 12 does not exist");
    assert_eq!(bytes, frame_of(FrameKind::Error, &body));

    let fatal = fatal(ErrorCode(4242), "");
    round_trip(Frame::Error(fatal));
    let long = "é".repeat(usize::from(MAX_ERROR_MESSAGE_LEN) / 2);
    let message = &long;
    round_trip(Frame::Error(ErrorFrame { message, ..fatal }));
}

#[test]
fn publish_batches_round_trip_in_order_with_their_payloads() {
    let mut buf = Vec::new();
    let mut publish = PublishBuilder::begin(&mut buf, ProducerId(5));
    publish.push(PublishId(u64::MAX), b"abc").unwrap();
    publish.push(PublishId(0), b"").unwrap();
    assert_eq!(publish.count(), 2);
    let written = publish.finish().unwrap();

    let mut body = vec![5, 0, 0, 0, 2, 0, 0, 0];
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    body.extend_from_slice(&[3, 0, 0, 0, b'a', b'b', b'c']);
    body.extend_from_slice(&[0; 8]);
    body.extend_from_slice(&[0; 4]);
    assert_eq!(buf, frame_of(FrameKind::Publish, &body));

    let (frame @ Frame::Publish(batch), consumed) = decoded(&buf) else {
        panic!()
    };
    let read = (consumed, batch.producer(), batch.count());
    assert_eq!(read, (written, ProducerId(5), 2));
    let messages = batch.messages();
    assert_eq!(messages.len(), 2);
    assert!(messages.eq([(PublishId(u64::MAX), &b"abc"[..]), (PublishId(0), &b""[..])]));
    let again = round_trip(frame);
    assert_eq!(again, buf, "a decoded batch encodes again as it was");
}

#[test]
fn publish_confirm_batches_round_trip_every_status() {
    let statuses = ConfirmStatus::ALL;
    for (i, status) in statuses.into_iter().enumerate() {
        assert_eq!(ConfirmStatus::from_u8(status.as_u8()), Some(status));
        assert_eq!(status.as_u8() as usize, i);
    }
    let buf = built(|out| publish_confirm(out, 1, (0..).zip(statuses)));
    assert_eq!(buf.len(), HEADER_LEN + 8 + 9 * statuses.len());
    let (frame @ Frame::PublishConfirm(batch), _) = decoded(&buf) else {
        panic!()
    };
    assert!(batch.confirms().map(|(_, s)| s).eq(statuses));
    assert!(
        batch
            .confirms()
            .map(|(id, _)| id.0)
            .eq(0..statuses.len() as u64)
    );
    round_trip(frame);
}

#[test]
fn deliver_and_consumer_confirm_batches_round_trip() {
    let big = vec![7; MAX_PAYLOAD_LEN as usize];
    let sent = [([1; 16], 0, &big[..]), ([2; 16], u32::MAX, &b"x"[..])];
    let buf = built(|out| deliver(out, 2, sent));
    let (frame @ Frame::Deliver(batch), _) = decoded(&buf) else {
        panic!()
    };
    assert_eq!(batch.consumer(), ConsumerId(2));
    let messages = [
        (Guid([1; 16]), DeliveryToken(0), &big[..]),
        (Guid([2; 16]), DeliveryToken(u32::MAX), &b"x"[..]),
    ];
    assert!(batch.messages().eq(messages));
    round_trip(frame);

    let mut buf = Vec::new();
    let mut confirm = ConsumerConfirmBuilder::begin(&mut buf, ConsumerId(2));
    for i in 0..MAX_MESSAGES_PER_FRAME {
        confirm.push(Guid([i as u8; 16]), DeliveryToken(i)).unwrap();
    }
    let refused = confirm.push(Guid([0; 16]), DeliveryToken(0));
    assert_eq!(refused, Err(EncodeError::BatchFull));
    confirm.finish().unwrap();
    let len = HEADER_LEN + 8 + 20 * MAX_MESSAGES_PER_FRAME as usize;
    assert_eq!(buf.len(), len);
    let (frame @ Frame::ConsumerConfirm(batch), _) = decoded(&buf) else {
        panic!()
    };
    let read = (batch.consumer(), batch.count());
    assert_eq!(read, (ConsumerId(2), MAX_MESSAGES_PER_FRAME));
    let pairs = (0..MAX_MESSAGES_PER_FRAME).map(|i| (i as u8, i));
    assert!(batch.deliveries().map(|(g, t)| (g.0[0], t.0)).eq(pairs));
    round_trip(frame);
}

#[test]
fn deliver_and_consumer_confirm_entries_are_the_documented_bytes() {
    // Deliver: guid(16), token(4), payload_len(4), payload.
    let mut guid = [0; 16];
    guid[0] = 0xAB;
    let buf = built(|out| deliver(out, 3, [(guid, 0x0102_0304, &b"hi"[..])]));
    let mut body = vec![3, 0, 0, 0, 1, 0, 0, 0];
    body.extend_from_slice(&guid);
    body.extend_from_slice(&[4, 3, 2, 1, 2, 0, 0, 0, b'h', b'i']);
    assert_eq!(buf, frame_of(FrameKind::Deliver, &body));

    // ConsumerConfirm: guid(16), token(4); the body exactly 8 + 20 x count.
    let buf = built(|out| consumer_confirm(out, 3, [(guid, 0x0102_0304)]));
    let mut body = vec![3, 0, 0, 0, 1, 0, 0, 0];
    body.extend_from_slice(&guid);
    body.extend_from_slice(&[4, 3, 2, 1]);
    assert_eq!(buf, frame_of(FrameKind::ConsumerConfirm, &body));
    // One byte short of its entry, or one past: the count does not fit the body.
    let kind = FrameKind::ConsumerConfirm;
    let mismatch = Err(DecodeError::CountMismatch { kind, count: 1 });
    assert_eq!(decode_body(kind, &body[..body.len() - 1]), mismatch);
    body.push(0);
    assert_eq!(decode_body(kind, &body), mismatch);
    // A version-4 entry (the GUID alone) is refused the same way.
    let v4 = [&[3, 0, 0, 0, 1, 0, 0, 0][..], &guid].concat();
    assert_eq!(decode_body(kind, &v4), mismatch);
}

#[test]
fn a_builder_refuses_what_breaks_a_limit_and_keeps_the_frame_valid() {
    let mut buf = b"kept".to_vec();
    let mut publish = PublishBuilder::begin(&mut buf, ProducerId(1));
    let too_big = vec![0; MAX_PAYLOAD_LEN as usize + 1];
    let (len, max) = (too_big.len(), MAX_PAYLOAD_LEN);
    let refused = publish.push(PublishId(0), &too_big);
    assert_eq!(refused, Err(EncodeError::PayloadTooLarge { len, max }));
    let max = vec![0; MAX_PAYLOAD_LEN as usize];
    for i in 0..3 {
        publish.push(PublishId(i), &max).unwrap();
    }
    // Body so far: 8 + 3 * (12 + 256 KiB); a fourth full payload would pass 1 MiB.
    let needs = 8 + 4 * (12 + MAX_PAYLOAD_LEN as usize);
    let refused = publish.push(PublishId(3), &max);
    let max = MAX_FRAME_LEN;
    assert_eq!(refused, Err(EncodeError::FrameFull { needs, max }));
    assert_eq!(publish.count(), 3);
    publish.finish().unwrap();
    assert_eq!(&buf[..4], b"kept");
    let (Frame::Publish(batch), consumed) = decoded(&buf[4..]) else {
        panic!()
    };
    assert_eq!((batch.count(), consumed), (3, buf.len() - 4));
}

#[test]
fn an_empty_or_abandoned_batch_leaves_the_buffer_as_it_was() {
    let mut buf = b"kept".to_vec();
    let publish = PublishBuilder::begin(&mut buf, ProducerId(1));
    let kind = FrameKind::Publish;
    assert_eq!(publish.finish(), Err(EncodeError::EmptyBatch { kind }));
    assert_eq!(buf, b"kept");

    let mut deliver = DeliverBuilder::begin(&mut buf, ConsumerId(1));
    deliver
        .push(Guid([0; 16]), DeliveryToken(0), b"dropped")
        .unwrap();
    drop(deliver);
    assert_eq!(buf, b"kept");
}

#[test]
fn encode_refuses_the_values_decode_would_and_writes_nothing() {
    let mut buf = Vec::new();
    let zero = |kind, field| EncodeError::Zero { kind, field };
    let welcome = Welcome {
        version: 0,
        heartbeat_ms: 0,
        limits: ServerLimits::PROTOCOL,
    };
    let mut refuses = |frame: Frame, error| assert_eq!(frame.encode(&mut buf), Err(error));
    use FrameKind as K;
    refuses(Frame::Hello(hello(0, 1, 0)), zero(K::Hello, "min_version"));
    let range = EncodeError::BadVersionRange { min: 2, max: 1 };
    refuses(Frame::Hello(hello(2, 1, 0)), range);
    refuses(Frame::Welcome(welcome), zero(K::Welcome, "version"));
    let open = Frame::OpenProducer(open_producer(1, 1, 0, ""));
    refuses(open, zero(K::OpenProducer, "max_unconfirmed"));
    refuses(Frame::Credit(credit(1, 0)), zero(K::Credit, "credit"));
    let long = "x".repeat(usize::from(MAX_ERROR_MESSAGE_LEN) + 1);
    let error = fatal(ErrorCode::INTERNAL, &long);
    let (len, max) = (long.len(), MAX_ERROR_MESSAGE_LEN);
    let got = Frame::Error(error).encode(&mut buf);
    assert_eq!(got, Err(EncodeError::MessageTooLong { len, max }));
    assert!(buf.is_empty());
}

#[test]
fn a_bad_header_is_refused_from_its_first_bad_byte() {
    use DecodeError as E;
    let (len, max) = (u32::MAX, MAX_FRAME_LEN);
    let too_large = E::FrameTooLarge { len, max };
    assert_eq!(decode(b""), Ok(None));
    assert_eq!(decode(b"Z"), Ok(None));
    assert_eq!(decode(b"X"), Err(E::BadMagic));
    assert_eq!(decode(b"ZX"), Err(E::BadMagic));
    // A peer of an older version is refused from its first frame's third byte.
    for version in 1..VERSION {
        let refused = Err(E::UnsupportedVersion { version });
        assert_eq!(decode(&[b'Z', b'D', version]), refused);
    }
    assert_eq!(decode(b"ZD\x05\x00"), Err(E::UnknownKind { kind: 0 }));
    assert_eq!(decode(b"ZD\x05\x03\x01"), Ok(None), "flags are read whole");
    let flags = E::UnknownFlags { flags: 0x8000 };
    assert_eq!(decode(b"ZD\x05\x03\x00\x80"), Err(flags));
    let mut huge = header(FrameKind::Publish, u32::MAX);
    assert_eq!(decode(&huge), Err(too_large));
    huge[6..].copy_from_slice(&MAX_FRAME_LEN.to_le_bytes());
    assert_eq!(decode(&huge), Ok(None), "the largest body is waited for");
    let version = E::UnsupportedVersion { version: 2 };
    for (kind, code) in [
        (E::BadMagic, ErrorCode::BAD_MAGIC),
        (version, ErrorCode::UNSUPPORTED_VERSION),
        (E::UnknownKind { kind: 0 }, ErrorCode::UNKNOWN_KIND),
        (E::UnknownFlags { flags: 1 }, ErrorCode::UNKNOWN_FLAGS),
        (too_large, ErrorCode::FRAME_TOO_LARGE),
    ] {
        assert_eq!(kind.code(), code);
        assert!(code.is_fatal());
    }
}

#[test]
fn a_version_4_hello_is_refused_unsupported_version() {
    assert_eq!(VERSION, 5);
    // A version-4 client's first frame: its header says 4.
    let mut v4 = encoded(Frame::Hello(hello(4, 4, 5000)));
    v4[2] = 4;
    let refused = decode(&v4).unwrap_err();
    assert_eq!(refused, DecodeError::UnsupportedVersion { version: 4 });
    assert_eq!(refused.code(), ErrorCode::UNSUPPORTED_VERSION);
    assert!(refused.code().is_fatal());
    // The same Hello under a version-5 header decodes: the broker refuses its range
    // (`zd-server`'s tests check that answer).
    let (Frame::Hello(hello), _) = decoded(&encoded(Frame::Hello(hello(4, 4, 5000)))) else {
        panic!("a Hello");
    };
    assert!(!(hello.min_version..=hello.max_version).contains(&VERSION));
}

#[test]
fn a_fixed_body_of_the_wrong_length_is_refused() {
    use FrameKind as K;
    for (kind, len) in [
        (K::Hello, 6_usize),
        (K::Welcome, 53),
        (K::Heartbeat, 0),
        (K::CloseProducer, 4),
        (K::OpenConsumer, 14),
        (K::CloseConsumer, 4),
        (K::Credit, 8),
    ] {
        // All ones: a valid body of the right length, for each of these kinds.
        for wrong in [len.saturating_sub(1), len + 1] {
            if wrong == len {
                continue;
            }
            let len = wrong as u32;
            let error = DecodeError::BadLength { kind, len };
            let got = decode_body(kind, &vec![1; wrong]);
            assert_eq!(got, Err(error), "{kind:?} of {wrong} bytes");
            assert_eq!(error.code(), ErrorCode::MALFORMED);
        }
        assert_eq!(decode_body(kind, &vec![1; len]), Ok(()), "{kind:?}");
    }
}

#[test]
fn forbidden_zeros_are_refused() {
    use FrameKind as K;
    let open = [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let cases: [(FrameKind, &[u8], &str); 4] = [
        (K::Hello, &[0, 1, 0, 0, 0, 0], "min_version"),
        (K::Welcome, &[0; 53], "version"),
        (K::OpenProducer, &open, "max_unconfirmed"),
        (K::Credit, &[1, 0, 0, 0, 0, 0, 0, 0], "credit"),
    ];
    for (kind, body, field) in cases {
        let zero = Err(DecodeError::Zero { kind, field });
        assert_eq!(decode_body(kind, body), zero);
    }
    let range = DecodeError::BadVersionRange { min: 3, max: 2 };
    assert_eq!(decode_body(K::Hello, &[3, 2, 0, 0, 0, 0]), Err(range));
    for kind in [
        K::Publish,
        K::PublishConfirm,
        K::Deliver,
        K::ConsumerConfirm,
    ] {
        let (field, len) = ("count", 7);
        let empty = decode_body(kind, &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(empty, Err(DecodeError::Zero { kind, field }));
        let short = Err(DecodeError::BadLength { kind, len });
        let got = decode_body(kind, &[1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(got, short, "no room for the count");
    }
}

#[test]
fn counts_that_do_not_fit_the_body_are_refused() {
    let batch = |count: u32, entries: &[u8]| {
        let mut body = vec![1, 0, 0, 0];
        body.extend_from_slice(&count.to_le_bytes());
        body.extend_from_slice(entries);
        body
    };
    let kind = FrameKind::ConsumerConfirm;
    // Two confirms announced, one there; one announced, two there; one cut short.
    for (count, entries) in [(2, vec![0; 20]), (1, vec![0; 40]), (1, vec![0; 19])] {
        let got = decode_body(kind, &batch(count, &entries));
        assert_eq!(got, Err(DecodeError::CountMismatch { kind, count }));
    }
    // A count over the limit, whatever the body.
    let (count, max) = (MAX_MESSAGES_PER_FRAME + 1, MAX_MESSAGES_PER_FRAME);
    let got = decode_body(kind, &batch(count, &[]));
    assert_eq!(got, Err(DecodeError::TooManyMessages { kind, count, max }));
    // A payload length that runs past the body.
    let kind = FrameKind::Publish;
    let mut entry = 7_u64.to_le_bytes().to_vec();
    entry.extend_from_slice(&100_u32.to_le_bytes());
    entry.extend_from_slice(&[0; 99]);
    let got = decode_body(kind, &batch(1, &entry));
    assert_eq!(got, Err(DecodeError::CountMismatch { kind, count: 1 }));
    // A payload length over the limit, though the body could hold it.
    let mut entry = [0; 24].to_vec();
    entry[20..].copy_from_slice(&(MAX_PAYLOAD_LEN + 1).to_le_bytes());
    entry.resize(24 + MAX_PAYLOAD_LEN as usize + 1, 0);
    let (len, max) = (MAX_PAYLOAD_LEN + 1, MAX_PAYLOAD_LEN);
    let got = decode_body(FrameKind::Deliver, &batch(1, &entry));
    assert_eq!(got, Err(DecodeError::PayloadTooLarge { len, max }));
    let mut entry = [0; 9];
    entry[8] = 10;
    let got = decode_body(FrameKind::PublishConfirm, &batch(1, &entry));
    assert_eq!(got, Err(DecodeError::UnknownStatus { status: 10 }));
}

#[test]
fn a_bad_error_frame_is_refused() {
    let body = |refused: u8, len: u16, message: &[u8]| {
        let mut body = vec![6, 0, refused, 0, 0, 0, 0];
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(message);
        body
    };
    let kind = FrameKind::Error;
    let long = vec![b'x'; usize::from(MAX_ERROR_MESSAGE_LEN) + 1];
    let (len, max) = (long.len() as u16, MAX_ERROR_MESSAGE_LEN);
    use DecodeError as E;
    let short = |len| Err(E::BadLength { kind, len });
    let unknown = E::UnknownRefusedKind { kind: 0x7f };
    for (body, answer) in [
        (body(0, 2, b"ok"), Ok(())),
        (body(0, 3, b"ok"), short(11)),
        (body(0, 1, b"ok"), short(11)),
        (vec![6, 0, 0], short(3)),
        (body(0, 2, b"\xff\xfe"), Err(E::BadUtf8)),
        (body(0x7f, 0, b""), Err(unknown)),
        (body(0, len, &long), Err(E::MessageTooLong { len, max })),
    ] {
        assert_eq!(decode_body(kind, &body), answer, "{body:?}");
    }
}

#[test]
fn a_producer_name_must_be_utf8_fill_its_body_and_fit_its_length_byte() {
    let kind = FrameKind::OpenProducer;
    let body = |name_len: u8, name: &[u8]| {
        let mut b = vec![1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, name_len];
        b.extend_from_slice(name);
        b
    };
    let named = frame_of(kind, &body(3, b"abc"));
    let (Frame::OpenProducer(open), _) = decoded(&named) else {
        panic!("a named OpenProducer");
    };
    assert_eq!((open.name, open.max_unconfirmed), ("abc", 8));
    let bad = decode_body(kind, &body(2, b"\xff\xfe"));
    assert_eq!(bad, Err(DecodeError::BadUtf8));
    assert_eq!(DecodeError::BadUtf8.code(), ErrorCode::MALFORMED);
    for (body, len) in [
        (body(3, b"ab"), 15),
        (body(1, b"ab"), 15),
        (body(1, b""), 13),
        (vec![1; 12], 12),
    ] {
        let got = decode_body(kind, &body);
        assert_eq!(got, Err(DecodeError::BadLength { kind, len }), "{body:?}");
    }
    // The longest name goes; one byte more is refused, and nothing is written.
    let longest = "n".repeat(MAX_PRODUCER_NAME_LEN);
    let open = open_producer(1, 0, 1, &longest);
    let bytes = round_trip(Frame::OpenProducer(open));
    assert_eq!(bytes.len(), HEADER_LEN + 13 + MAX_PRODUCER_NAME_LEN);
    let too_long = format!("{longest}n");
    let mut out = b"kept".to_vec();
    let name = &too_long;
    let refused = Frame::OpenProducer(OpenProducer { name, ..open }).encode(&mut out);
    let (len, max) = (MAX_PRODUCER_NAME_LEN + 1, MAX_PRODUCER_NAME_LEN);
    assert_eq!(refused, Err(EncodeError::NameTooLong { len, max }));
    assert_eq!(out, b"kept");
    assert!(refused.unwrap_err().to_string().contains("producer name"));
    assert!(!ErrorCode::NAME_IN_USE.is_fatal());
    assert_eq!(ErrorCode::NAME_IN_USE.to_string(), "name in use (106)");
}

#[test]
fn every_kind_byte_names_its_kind_and_codes_their_range() {
    for kind in FrameKind::ALL {
        assert_eq!(FrameKind::from_u8(kind.as_u8()), Some(kind));
    }
    let known = (0..=u8::MAX).filter(|&b| FrameKind::from_u8(b).is_some());
    assert_eq!(known.count(), FrameKind::ALL.len());
    assert!(ErrorCode::HANDSHAKE_REQUIRED.is_fatal() && !ErrorCode::ID_IN_USE.is_fatal());
    assert_eq!(ErrorCode::UNKNOWN_APP.to_string(), "unknown app (101)");
    assert_eq!(format!("{:?}", ErrorCode(7777)), "ErrorCode(7777)");
    let guid = format!("{:?}", Guid([0xab; 16]));
    assert_eq!(guid, format!("Guid({})", "ab".repeat(16)));
    // Every error says what it is.
    let (kind, count) = (FrameKind::Deliver, 3);
    let mismatch = DecodeError::CountMismatch { kind, count }.to_string();
    let said = "a Deliver body does not hold exactly its 3 messages";
    assert_eq!(mismatch, said);
    let full = EncodeError::BatchFull.to_string();
    assert_eq!(full, "the batch holds the most messages a frame may");
}

#[test]
fn an_inconsistent_stored_window_is_refused_both_ways() {
    let opened = |flags: u8, last: u64, known: u32, bits: &[u8]| {
        let mut body = vec![7, 0, 0, 0, flags];
        body.extend_from_slice(&last.to_le_bytes());
        body.extend_from_slice(&known.to_le_bytes());
        body.extend_from_slice(bits);
        frame_of(FrameKind::ProducerOpened, &body)
    };
    for (what, bytes) in [
        ("an undefined flag", opened(2, 0, 0, &[])),
        ("a last_stored with nothing stored", opened(0, 5, 0, &[])),
        ("known with nothing stored", opened(0, 0, 1, &[1])),
        ("stored with known 0", opened(1, 5, 0, &[])),
        ("the highest's own bit clear", opened(1, 5, 2, &[0b10])),
        ("bits past known", opened(1, 5, 2, &[0b101])),
        ("known above last_stored + 1", opened(1, 1, 3, &[0b111])),
        ("known above the limit", {
            let known = MAX_STORED_WINDOW + 1;
            opened(1, u64::MAX, known, &vec![0xff; known.div_ceil(8) as usize])
        }),
    ] {
        assert_eq!(decode(&bytes), Err(DecodeError::BadStoredWindow), "{what}");
    }
    assert_eq!(DecodeError::BadStoredWindow.code(), ErrorCode::MALFORMED);
    let short = opened(1, 5, 9, &[1]);
    let bad_length = matches!(decode(&short), Err(DecodeError::BadLength { .. }));
    assert!(bad_length, "bits shorter than known needs");
    let bad = Frame::ProducerOpened(producer_opened(1, 5, 2, &[0b10]));
    let mut out = Vec::new();
    assert_eq!(bad.encode(&mut out), Err(EncodeError::BadStoredWindow));
    assert!(out.is_empty(), "nothing written");
}
