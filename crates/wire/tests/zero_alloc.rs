//! The codec allocates nothing per frame, nor on hostile headers (its own binary: one test).

use zerodispatch_testkit::{CountingAllocator, allocations_during};
mod support;

use support::*;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const BATCHES: u64 = if cfg!(miri) { 100 } else { 100_000 };
const WARM_UP: u64 = 100;
const PER_BATCH: u64 = 16;

/// Encodes and decodes a round of every batched kind and fixed frames: a checksum of what was read.
fn round(buf: &mut Vec<u8>, batch: u64, payload: &[u8]) -> u64 {
    buf.clear();
    let ids = (0..PER_BATCH).map(|i| batch * PER_BATCH + i);
    publish(buf, 1, ids.clone().map(|id| (id, payload)));
    publish_confirm(buf, 1, ids.map(|id| (id, ConfirmStatus::Stored)));
    let guids = (0..PER_BATCH).map(|i| [i as u8; 16]);
    deliver(buf, 2, guids.clone().map(|guid| (guid, 7, payload)));
    consumer_confirm(buf, 2, guids.map(|guid| (guid, 7)));
    for frame in [
        Frame::Credit(credit(2, PER_BATCH as u32)),
        Frame::OpenProducer(open_producer(1, 0, 7, "orders")),
        Frame::ProducerOpened(producer_opened(1, batch, 1, &[1])),
    ] {
        frame.encode(buf).unwrap();
    }

    let mut sum = 0;
    let mut rest = &buf[..];
    while let Some((frame, consumed)) = decode(rest).unwrap() {
        match frame {
            Frame::Publish(batch) => {
                sum += batch
                    .messages()
                    .map(|(id, p)| id.0 + p.len() as u64)
                    .sum::<u64>();
            }
            Frame::PublishConfirm(b) => sum += b.confirms().map(|(id, _)| id.0).sum::<u64>(),
            Frame::Deliver(batch) => {
                sum += batch
                    .messages()
                    .map(|(g, t, p)| u64::from(g.0[0]) + u64::from(t.0) + p.len() as u64)
                    .sum::<u64>();
            }
            Frame::ConsumerConfirm(batch) => {
                sum += batch
                    .deliveries()
                    .map(|(g, t)| u64::from(g.0[15]) + u64::from(t.0))
                    .sum::<u64>()
            }
            Frame::Credit(credit) => sum += u64::from(credit.credit),
            Frame::OpenProducer(open) => {
                sum += open.name.len() as u64 + u64::from(open.max_unconfirmed);
            }
            Frame::ProducerOpened(opened) => {
                sum += opened.stored.last_stored.unwrap_or(0) + u64::from(opened.stored.known);
            }
            other => panic!("unexpected {other:?}"),
        }
        rest = &rest[consumed..];
    }
    assert!(rest.is_empty());
    sum
}

#[test]
fn encoding_and_decoding_batches_into_a_reused_buffer_allocates_nothing() {
    let payload = [0x5a_u8; 64];
    let mut buf = Vec::new();
    for batch in 0..WARM_UP {
        round(&mut buf, batch, &payload);
    }
    let huge = header(FrameKind::Publish, MAX_FRAME_LEN);
    let oversize = header(FrameKind::Publish, u32::MAX);

    let (sum, allocations) = allocations_during(|| {
        let mut sum = 0;
        for batch in WARM_UP..WARM_UP + BATCHES {
            sum += round(&mut buf, batch, &payload);
            assert_eq!(decode(&huge), Ok(None));
            assert!(decode(&oversize).is_err());
        }
        sum
    });
    let what = format!("encoding and decoding {BATCHES} rounds");
    assert_eq!(allocations, 0, "allocations while {what}");

    // Every round decoded what it encoded.
    let ids: u64 = (WARM_UP * PER_BATCH..(WARM_UP + BATCHES) * PER_BATCH).sum();
    // Payloads, GUID bytes, the delivery tokens (7 each, delivered and confirmed), the
    // credit, the name and cap of the open.
    let per_round_rest = PER_BATCH * 64 * 2
        + (0..PER_BATCH).sum::<u64>() * 2
        + PER_BATCH * 7 * 2
        + PER_BATCH
        + "orders".len() as u64
        + 7;
    // Each round's ProducerOpened: its last_stored and its window's one known id.
    let last_stored: u64 = (WARM_UP..WARM_UP + BATCHES).sum::<u64>() + BATCHES;
    assert_eq!(sum, 2 * ids + BATCHES * per_round_rest + last_stored);
}
