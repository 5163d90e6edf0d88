//! `docs/protocol.md` against the codec: its `frame` blocks, and its windows written in words.

mod support;

use support::*;

const DOC: &str = include_str!("../../../docs/protocol.md");

/// The bytes of each `frame` block in order: a line's hex bytes, then after two spaces, words.
fn examples() -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for (at, line) in (1..).zip(DOC.lines()) {
        match (&mut current, line.trim_end()) {
            (None, "```frame") => current = Some(Vec::new()),
            (None, _) => {}
            (Some(_), "```") => blocks.push(current.take().expect("in a block")),
            (Some(bytes), line) => {
                let hex = line.split("  ").next().unwrap_or("");
                for token in hex.split(' ').filter(|t| !t.is_empty()) {
                    let place = format!("docs/protocol.md:{at}: `{token}`");
                    assert!(token.len() == 2, "{place} is not one byte");
                    let hex = u8::from_str_radix(token, 16);
                    let byte = hex.unwrap_or_else(|_| panic!("{place} is not hex"));
                    bytes.push(byte);
                }
            }
        }
    }
    assert!(current.is_none(), "a `frame` block is not closed");
    blocks
}

/// The frames the document's blocks show, in its order, encoded by the codec.
fn expected() -> Vec<Vec<u8>> {
    let limits = [
        4096, 16_384, 16_384, 1024, 16_384, 15_000, 256, 10_000, 10_000, 16_384, 64,
    ];
    let fixed = [
        Frame::Hello(hello(VERSION, VERSION, 5000)),
        Frame::Welcome(welcome(VERSION, 5000, limits, 16, 16)),
        Frame::OpenProducer(open_producer(1, 0, 1000, "orders")),
        Frame::ProducerOpened(producer_opened(1, 3, 4, &[0b1101])),
    ];
    let g0: [u8; 16] = std::array::from_fn(|i| i as u8);
    let mut frames: Vec<_> = fixed.into_iter().map(encoded).collect();
    frames.push(built(|out| publish(out, 1, [(2, &b"c"[..])])));
    let stored = [(2, ConfirmStatus::Stored)];
    frames.push(built(|out| publish_confirm(out, 1, stored)));
    frames.push(built(|out| deliver(out, 7, [(g0, 0, &b"a"[..])])));
    frames.push(built(|out| consumer_confirm(out, 7, [(g0, 0)])));
    let error = fatal(ErrorCode::TOO_MANY_CONNECTIONS, "");
    frames.push(encoded(Frame::Error(error)));
    frames
}

#[test]
fn every_frame_in_the_document_decodes_to_what_it_says_and_encodes_back() {
    let (examples, expected) = (examples(), expected());
    let (found, known) = (examples.len(), expected.len());
    let blocks = format!("docs/protocol.md has {found} `frame` blocks; this test knows {known}");
    assert_eq!(found, known, "{blocks}");
    for (bytes, codec) in examples.iter().zip(&expected) {
        let kind = decoded(codec).0.kind();
        let doc = format!("the document's {kind:?}");
        let (frame, len) = decode(bytes)
            .unwrap_or_else(|e| panic!("{doc} does not decode: {e}"))
            .unwrap_or_else(|| panic!("{doc} is cut short"));
        assert_eq!(len, bytes.len(), "{doc} has bytes past its frame");
        assert_eq!(frame.kind(), kind, "{doc} block");
        let again = built(|out| frame.encode(out).unwrap());
        assert_eq!(&again, bytes, "{doc} does not encode back");
        let named = "the codec's encoding of the frame it names";
        assert_eq!(bytes, codec, "{doc} is not {named}");
    }
}

#[test]
fn every_stored_window_written_in_words_is_a_frame_of_the_document() {
    let windows: Vec<(Option<u64>, u32, Vec<u8>)> = examples()
        .iter()
        .filter_map(|bytes| match decode(bytes) {
            Ok(Some((Frame::ProducerOpened(opened), _))) => Some((
                opened.stored.last_stored,
                opened.stored.known,
                opened.stored.bits.to_vec(),
            )),
            _ => None,
        })
        .collect();
    let mut said = 0;
    for (at, _) in DOC.match_indices("last_stored ") {
        let words = &DOC[at..];
        let Some((last, known, bits)) = window_in_words(words) else {
            continue;
        };
        said += 1;
        let mut bytes = vec![0_u8; known.div_ceil(8) as usize];
        for (i, bit) in bits.bytes().rev().enumerate() {
            if bit == b'1' {
                bytes[i / 8] |= 1 << (i % 8);
            }
        }
        let opened = Frame::ProducerOpened(producer_opened(1, last, known, &bytes));
        let text = &words[..words.find('}').unwrap_or(words.len())];
        let valid = opened.encode(&mut Vec::new()).is_ok();
        assert!(valid, "`{text}` is no valid window");
        let in_block = windows.contains(&(Some(last), known, bytes.clone()));
        assert!(in_block, "`{text}` is not the window of a `frame` block");
    }
    assert!(said >= 2, "the document writes its window example in words");
}

/// `last_stored N, known K, bits 0bB` at the start of `words`.
fn window_in_words(words: &str) -> Option<(u64, u32, &str)> {
    let rest = words.strip_prefix("last_stored ")?;
    let (last, rest) = rest.split_once(", known ")?;
    let (known, rest) = rest.split_once(", bits 0b")?;
    let end = rest
        .find(|c: char| c != '0' && c != '1')
        .unwrap_or(rest.len());
    Some((last.parse().ok()?, known.parse().ok()?, &rest[..end]))
}
