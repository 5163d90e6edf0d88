//! Proof: once warm, a named producer's messages through the server allocate nothing.

mod common;

use common::*;
use zerodispatch_testkit::{CountingAllocator, allocations_during};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = 100_000;
const WARM_UP: u64 = 20_000;
const BATCH: u64 = 64;

/// One round: a batch published, delivered, confirmed with credit, and its confirms read.
fn round(producer: &mut Client, consumer: &mut Client, guids: &mut Vec<Delivered>, first: u64) {
    producer.publish(1, first..first + BATCH, payload_of);
    guids.clear();
    consumer.deliveries(7, BATCH as usize, |guid, payload| {
        assert_eq!(payload.len(), (id_in(payload) % 40 + 8) as usize);
        guids.push(guid);
    });
    consumer.confirm(7, guids, true);
    producer.all_stored(1, BATCH as usize);
}

/// Runs the proof without libtest, whose thread allocates when a test passes 60 s.
fn main() {
    zerodispatch_testkit::proof_main(
        "a_message_through_the_server_allocates_nothing_once_warm",
        a_message_through_the_server_allocates_nothing_once_warm,
    );
}

fn a_message_through_the_server_allocates_nothing_once_warm() {
    let server = priority_server();
    let addr = server.local_addr();
    let mut producer = Client::hello(addr);
    let mut consumer = Client::consumer(addr, 7, 0, 0, BATCH as u32);
    // A named producer: its messages go through the queue's deduplication.
    let opened = producer.open_named_producer(1, 0, 1024, "zero-alloc");
    assert_eq!(opened, Ok(None));
    let mut guids = Vec::with_capacity(BATCH as usize);
    let mut next = 0;
    let mut rounds_until = |end| {
        while next < end {
            round(&mut producer, &mut consumer, &mut guids, next);
            next += BATCH;
        }
    };
    rounds_until(WARM_UP);
    let ((), allocated) = allocations_during(|| rounds_until(WARM_UP + MESSAGES));
    assert_eq!(allocated, 0, "{allocated} allocations for {MESSAGES}");
    assert_eq!(server.stats().stale_handles, 0);
}
