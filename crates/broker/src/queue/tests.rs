use std::sync::{Arc, Mutex};

use zerodispatch_core::testing::TestDispatcher;
use zerodispatch_core::{
    Client, ClientHandle, ClientType, Context, Dispatcher, Event, Placement, PoolConfig,
};

use crate::ids::{AppId, ConsumerId, Guid, Payload, ProducerId, QueueId};
use crate::message::{AckStatus, Confirm, DeliveryToken};
use crate::protocol::{BrokerMsg, PutBody};

use super::{QueueClient, QueueEngine};

type Seen = Arc<Mutex<Vec<BrokerMsg>>>;

/// A session that keeps what the queue sends it (ACKs, pushes).
struct Session(Seen);
impl Client<BrokerMsg> for Session {
    fn on_message(&mut self, message: BrokerMsg, _ctx: &mut Context<BrokerMsg>) {
        self.0.lock().unwrap().push(message);
    }
}

/// The queue's client alone on the stepped dispatcher, with a session to ACK to.
fn stepped_queue(capacity: usize) -> (TestDispatcher<BrokerMsg>, ClientHandle, ClientHandle, Seen) {
    let test = Dispatcher::<BrokerMsg>::builder()
        .pool(ClientType::Session, PoolConfig::new(1))
        .pool(ClientType::Queue, PoolConfig::new(1))
        .build_stepped()
        .unwrap();
    let engine = QueueEngine::for_test(capacity, None);
    let queue = test
        .register(
            ClientType::Queue,
            QueueClient::new(engine),
            Placement::LeastLoaded,
        )
        .unwrap()
        .erase();
    let seen = Seen::default();
    let session = test
        .register(
            ClientType::Session,
            Session(seen.clone()),
            Placement::LeastLoaded,
        )
        .unwrap()
        .erase();
    (test, queue, session, seen)
}

fn put(
    test: &TestDispatcher<BrokerMsg>,
    queue: ClientHandle,
    producer: ClientHandle,
    seq: u64,
) -> Guid {
    let guid = Guid::new(ProducerId(7), seq);
    let payload = Payload {
        handle: seq,
        len: 8,
    };
    test.dispatch(
        queue,
        Event::Message(BrokerMsg::Put {
            producer,
            guid,
            body: PutBody::new(payload, session_slot(seq)),
        }),
    )
    .unwrap();
    guid
}

/// The slot of the session's table that `put` names for message `seq`: not the queue's
/// slot, so that a test can tell which one an ACK carries.
fn session_slot(seq: u64) -> u32 {
    u32::try_from(seq).unwrap() + 1000
}

fn acks(seen: &Seen) -> Vec<(Guid, AckStatus)> {
    let mut seen = seen.lock().unwrap();
    let acks = seen
        .iter()
        .filter_map(|m| match m {
            BrokerMsg::Ack { guid, status, .. } => Some((*guid, *status)),
            _ => None,
        })
        .collect();
    seen.clear();
    acks
}

#[test]
fn each_ack_carries_the_session_slot_its_put_named() {
    let (test, queue, session, seen) = stepped_queue(1);
    let stored = put(&test, queue, session, 0);
    let refused = put(&test, queue, session, 1);
    test.run_until_idle();
    let slots: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            BrokerMsg::Ack { guid, slot, status } => Some((*guid, *slot, *status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        slots,
        [
            (stored, session_slot(0), AckStatus::Stored),
            (refused, session_slot(1), AckStatus::RejectedQueueFull)
        ]
    );
}

#[test]
fn on_the_stepped_dispatcher_a_queue_acks_at_its_flush_refuses_when_full_and_frees_at_confirm() {
    let (test, queue, session, seen) = stepped_queue(2);
    let first = put(&test, queue, session, 0);
    let second = put(&test, queue, session, 1);
    let third = put(&test, queue, session, 2);
    assert!(acks(&seen).is_empty(), "nothing runs before the test steps");
    test.run_until_idle();
    assert_eq!(
        acks(&seen),
        [
            (first, AckStatus::Stored),
            (second, AckStatus::Stored),
            (third, AckStatus::RejectedQueueFull)
        ],
        "stored means stored: the third found the table full"
    );
    // A consumer attached: the queue pushes both at its flush; a confirm frees a slot.
    let consumer = ConsumerId(1);
    let attach = BrokerMsg::Attach {
        consumer,
        app: AppId(0),
        session,
    };
    test.dispatch(queue, Event::Message(attach)).unwrap();
    test.run_until_idle();
    let pushed: Vec<(Guid, DeliveryToken)> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            BrokerMsg::Push { guid, slot, .. } => Some((*guid, *slot)),
            _ => None,
        })
        .collect();
    assert_eq!(pushed.len(), 2);
    let token = pushed.iter().find(|(g, _)| *g == first).unwrap().1;
    let confirm = Confirm {
        queue: QueueId(0),
        guid: first,
        token,
        consumer,
        app: AppId(0),
    };
    test.dispatch(queue, Event::Message(BrokerMsg::Confirm(confirm)))
        .unwrap();
    let fourth = put(&test, queue, session, 3);
    test.run_until_idle();
    assert_eq!(
        acks(&seen),
        [(fourth, AckStatus::Stored)],
        "the confirm freed its slot"
    );
}

#[test]
fn a_flush_sends_its_acks_before_its_pushes() {
    // The consumer and the producer share the session, which keeps what it gets in order.
    let (test, queue, session, seen) = stepped_queue(4);
    let attach = BrokerMsg::Attach {
        consumer: ConsumerId(1),
        app: AppId(0),
        session,
    };
    test.dispatch(queue, Event::Message(attach)).unwrap();
    let guid = put(&test, queue, session, 0);
    test.run_until_idle();
    let order: Vec<(&str, Guid)> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            BrokerMsg::Ack { guid, .. } => Some(("ack", *guid)),
            BrokerMsg::Push { guid, .. } => Some(("push", *guid)),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [("ack", guid), ("push", guid)],
        "a producer's confirm does not wait behind the flush's deliveries"
    );
}
