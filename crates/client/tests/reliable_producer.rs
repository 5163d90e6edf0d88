//! The reliable producer through drops, with dedup: one outcome each, stored once, resent in order.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;
use zerodispatch_client::ConfirmStatus::{self, Closed, NotSent, Stored, TimedOut};
use zerodispatch_client::{
    Backoff, ClientError, QueueId, Recovery, ReliableProducer, ReliableProducerOptions,
    TrySendError,
};
use zerodispatch_wire::ErrorCode;

/// The options of producer "orders", capped at `max_unconfirmed`.
fn options(max_unconfirmed: u32, backoff: Backoff) -> ReliableProducerOptions {
    reliable("orders", max_unconfirmed, backoff)
}

/// Reconnecting within 20 ms.
fn quick() -> Backoff {
    backoff(5, 20)
}

/// Never within a test.
fn slow() -> Backoff {
    backoff(60_000, 60_000)
}

/// Waits until session `n` has received `len` messages.
async fn wait_session(broker: &FakeBroker, n: usize, len: usize) {
    let what = format!("{len} published in session {n}");
    let done = || sessions(broker).get(n).is_some_and(|s| s.len() == len);
    wait_until(&what, done).await;
}

/// The publish ids each session received, split at each `OpenProducer`.
fn sessions(broker: &FakeBroker) -> Vec<Vec<u64>> {
    let mut sessions: Vec<Vec<u64>> = Vec::new();
    for frame in broker.frames() {
        match frame {
            Received::OpenProducer { .. } => sessions.push(Vec::new()),
            Received::Publish { ids, .. } => sessions.last_mut().unwrap().extend(ids),
            _ => {}
        }
    }
    sessions
}

/// The recoveries `producer` reports, from now on.
fn recoveries(producer: &ReliableProducer) -> Arc<Mutex<Vec<Recovery>>> {
    let recoveries = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&recoveries);
    producer.on_recovery(move |r| sink.lock().unwrap().push(*r));
    recoveries
}

/// Sends messages numbered `ids` (each its id, little-endian), in order.
async fn send_ids(producer: &ReliableProducer, ids: std::ops::Range<u64>) {
    for i in ids {
        producer.send(&i.to_le_bytes()).await.unwrap();
    }
}

/// Sends `0..n`, waits until the first session has them all, then drops its connection.
async fn lose_first_session(broker: &FakeBroker, producer: &ReliableProducer, n: u64) {
    send_ids(producer, 0..n).await;
    wait_session(broker, 0, n as usize).await;
    broker.act(Action::Drop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drops_mid_batch_lose_nothing_and_store_nothing_twice() {
    let config = Config::default().with(|c| {
        (c.dedup, c.drop_after_messages, c.drops) = (true, Some(300), 3);
    });
    let (broker, producer, outcomes) = producing_reliably(config, options(500, quick())).await;
    const N: u64 = 3_000;
    send_ids(&producer, 0..N).await;
    wait_settled(&outcomes, N, Stored).await;
    assert_eq!(broker.stored(), ids(N), "each stored once, in order");
    let stats = producer.stats();
    assert_eq!(stats.reconnects, 3);
    assert!(stats.resent > 0, "{stats:?}");
    let sessions = sessions(&broker);
    assert_eq!(sessions.len(), 4);
    for ids in &sessions {
        let in_order = ids.windows(2).all(|w| w[0] < w[1]);
        assert!(in_order, "in order in each session: {ids:?}");
    }
    producer.close().await;
    let count = outcomes.lock().unwrap().len();
    assert_eq!(count, N as usize, "no outcome after the last");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_mid_confirm_settles_the_stored_and_resends_the_rest_with_their_ids() {
    let config = Config::holding().with(|c| (c.dedup, c.store_limit) = (true, Some(40)));
    let (broker, producer, outcomes) = producing_reliably(config, options(1000, quick())).await;
    let recoveries = recoveries(&producer);
    send_ids(&producer, 0..100).await;
    wait_session(&broker, 0, 100).await;
    // 0..40 stored, 0..10 confirmed, then the connection goes.
    broker.act(Action::ConfirmThenDrop(10));
    wait_session(&broker, 1, 60).await;
    // The re-open's last_stored was the broker's first answer: it ended the outage.
    let all = recoveries.lock().unwrap().clone();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].confirmed_at, all[0].reconnected_at);
    let settled = outcomes.lock().unwrap()[10];
    assert_eq!(settled.publish_id.0, 10, "the first settled by last_stored");
    assert_eq!(settled.settled_at, all[0].confirmed_at);
    // Something new goes after the resend.
    producer.send(b"new").await.unwrap();
    wait_session(&broker, 1, 61).await;
    let (second, resent) = (sessions(&broker).remove(1), ids(101).split_off(40));
    assert_eq!(second, resent, "the not stored, in order, then the new");
    broker.act(Action::ConfirmHeld(Stored));
    wait_settled(&outcomes, 101, Stored).await;
    assert_eq!(broker.stored(), ids(101));
    let stats = producer.stats();
    assert_eq!(stats.stored_before, 30, "10..40 settled by last_stored");
    assert_eq!(stats.resent, 60);
    assert_eq!(stats.reconnects, 1);
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_message_stored_already_is_confirmed_not_stored_again() {
    // Drops every 30 messages, before any confirm: some resends find their message stored.
    let config = Config::default().with(|c| {
        (c.dedup, c.drop_after_messages, c.drops) = (true, Some(30), 2);
    });
    let (broker, producer, outcomes) = producing_reliably(config, options(1000, quick())).await;
    send_ids(&producer, 0..200).await;
    wait_settled(&outcomes, 200, Stored).await;
    assert_eq!(broker.stored(), ids(200), "each stored once");
    assert_eq!(producer.stats().reconnects, 2);
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_producer_of_a_name_numbers_on_from_what_was_stored() {
    let config = Config::default().with(|c| c.dedup = true);
    let (broker, first, outcomes) = producing_reliably(config, options(100, quick())).await;
    send_ids(&first, 0..5).await;
    wait_outcomes(&outcomes, 5).await;
    first.close().await;
    let (second, outcomes) = reliable_producer(broker.addr, options(100, quick())).await;
    let sixth = second.send(b"sixth").await.unwrap();
    assert_eq!(sixth.0, 5, "after the name's last stored");
    wait_outcomes(&outcomes, 1).await;
    assert_eq!(outcomes.lock().unwrap()[0].status, Stored);
    assert_eq!(broker.stored(), ids(6), "stored, not taken for a duplicate");
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_during_a_reconnect_gives_each_message_one_outcome() {
    let (broker, producer, outcomes) =
        producing_reliably(Config::holding(), options(15, slow())).await;
    lose_first_session(&broker, &producer, 10).await;
    wait_until("the loss", || !producer.is_connected()).await;
    // Taken while reconnecting, within the cap.
    for i in 10..15_u64 {
        producer.try_send(&i.to_le_bytes()).unwrap();
    }
    assert_eq!(producer.try_send(b"over"), Err(TrySendError::Full));
    assert_eq!(producer.unconfirmed(), 15);
    producer.close().await;
    let all = statuses(&exactly_once(&outcomes, 15));
    assert_eq!(all[..10], [Closed; 10], "written on the lost one");
    assert_eq!(all[10..], [NotSent; 5], "never written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_waits_while_reconnecting_at_the_cap() {
    let mut backoff = backoff(200, 200);
    backoff.jitter = 0.0;
    let (broker, producer, outcomes) =
        producing_reliably(Config::holding(), options(4, backoff)).await;
    lose_first_session(&broker, &producer, 4).await;
    {
        let start = Instant::now();
        let waiting = producer.send(b"fifth");
        tokio::pin!(waiting);
        // At the cap while the new session comes (200 ms) and the broker confirms.
        let wait = tokio::time::timeout(ms(100), waiting.as_mut());
        assert!(wait.await.is_err(), "send waits at the cap");
        wait_session(&broker, 1, 4).await;
        assert!(start.elapsed() >= ms(190), "the backoff's delay");
        broker.act(Action::ConfirmHeld(Stored));
        assert_eq!(waiting.await.unwrap().0, 4);
    }
    wait_session(&broker, 1, 5).await;
    broker.act(Action::ConfirmHeld(Stored));
    wait_exactly_once(&outcomes, 5).await;
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_during_close_gives_each_message_one_outcome() {
    let config = Config::holding().with(|c| c.drop_on_close = true);
    let (broker, producer, outcomes) = producing_reliably(config, options(100, quick())).await;
    send_ids(&producer, 0..10).await;
    wait_session(&broker, 0, 10).await;
    tokio::time::timeout(Duration::from_secs(5), producer.close())
        .await
        .expect("close returns");
    all_settled(&outcomes, 10, Closed);
    assert_eq!(broker.log().opens, 1, "no reconnect once closing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_in_use_is_retried_by_the_backoff_bounded() {
    let config = Config::default().with(|c| c.refuse_reopens = 3);
    let mut backoff = backoff(20, 50);
    (backoff.factor, backoff.jitter) = (2.0, 0.0);
    let (broker, producer, outcomes) = producing_reliably(config, options(100, backoff)).await;
    broker.act(Action::Drop);
    let dropped = Instant::now();
    wait_until("the reconnect", || producer.stats().reconnects == 1).await;
    let opens = broker.times_of(|f| matches!(f, Received::OpenProducer { .. }));
    let tries = opens.len();
    assert_eq!(tries, 5, "the first, three refused, the one that opened");
    // Delays 20, 40, 50 (the max), 50 ms: each attempt waits its delay, never much more.
    let gaps: Vec<Duration> = std::iter::once(opens[1] - dropped)
        .chain(opens.windows(2).skip(1).map(|w| w[1] - w[0]))
        .collect();
    for (gap, delay) in gaps.iter().zip([20, 40, 50, 50]) {
        assert!(*gap + ms(2) >= ms(delay), "{gaps:?}");
        assert!(*gap < ms(delay + 500), "bounded: {gaps:?}");
    }
    producer.send(b"after").await.unwrap();
    wait_settled(&outcomes, 1, Stored).await;
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_timeouts_run_while_reconnecting() {
    let mut options = options(100, slow());
    options.producer.confirm_timeout = Some(ms(100));
    let (broker, producer, outcomes) = producing_reliably(Config::holding(), options).await;
    let start = Instant::now();
    lose_first_session(&broker, &producer, 5).await;
    wait_until("the loss", || !producer.is_connected()).await;
    producer.send(b"while reconnecting").await.unwrap();
    for outcome in wait_exactly_once(&outcomes, 6).await {
        assert_eq!(outcome.status, TimedOut);
        assert!(outcome.settled_at.duration_since(outcome.taken_at) >= ms(100));
    }
    assert!(start.elapsed() < Duration::from_secs(2));
    producer.close().await;
    assert_eq!(outcomes.lock().unwrap().len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_options_are_refused() {
    let broker = FakeBroker::start(Config::default()).await;
    // Producer "a"'s default options as `tune` changes them.
    let a = |tune: fn(&mut ReliableProducerOptions)| {
        let mut options = ReliableProducerOptions::new("a");
        tune(&mut options);
        options
    };
    for bad in [
        ReliableProducerOptions::new(""),
        ReliableProducerOptions::new("x".repeat(256)),
        a(|o| o.buffer_bytes = 1024),
        a(|o| o.backoff.factor = 0.5),
        a(|o| o.backoff.max = ms(1)),
    ] {
        let error = ReliableProducer::connect(broker.addr, QueueId(0), bad, |_| {});
        let error = error.await.unwrap_err();
        let invalid = matches!(error, ClientError::InvalidOption { .. });
        assert!(invalid, "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_close_do_not_wait_for_a_hanging_connect() {
    let config = Config::holding().with(|c| c.silent_reconnects = true);
    let mut options = options(100, quick());
    options.client.handshake_timeout = Duration::from_secs(30);
    options.producer.confirm_timeout = Some(ms(100));
    let (broker, producer, outcomes) = producing_reliably(config, options).await;
    lose_first_session(&broker, &producer, 3).await;
    wait_until("a hanging attempt", || broker.log().connections >= 2).await;
    // Timed out while the handshake hangs.
    wait_outcomes(&outcomes, 3).await;
    producer.send(b"while connecting").await.unwrap();
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), producer.close())
        .await
        .expect("close does not wait for the handshake");
    assert!(start.elapsed() < Duration::from_secs(2));
    let all = statuses(&exactly_once(&outcomes, 4));
    assert_eq!(all, [TimedOut, TimedOut, TimedOut, NotSent]);
}

#[test]
fn the_handles_are_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<ReliableProducer>();
    shared::<zerodispatch_client::ReliableConsumer>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_blocking_waits_at_the_cap_across_a_reconnect() {
    let (broker, producer, outcomes) =
        producing_reliably(Config::holding(), options(4, quick())).await;
    let producer = Arc::new(producer);
    lose_first_session(&broker, &producer, 4).await;
    let sender = Arc::clone(&producer);
    let blocked = std::thread::spawn(move || sender.send_blocking(b"fifth"));
    wait_session(&broker, 1, 4).await;
    assert!(!blocked.is_finished(), "at the cap until a confirm");
    broker.act(Action::ConfirmHeld(Stored));
    assert_eq!(blocked.join().unwrap().unwrap().0, 4);
    wait_session(&broker, 1, 5).await;
    broker.act(Action::ConfirmHeld(Stored));
    wait_exactly_once(&outcomes, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reopen_closes_the_producer_and_wakes_its_senders() {
    let config = Config::holding().with(|c| {
        (c.refuse_reopens, c.reopen_refusal) = (1, Some(ErrorCode::UNKNOWN_QUEUE));
    });
    let (broker, producer, outcomes) = producing_reliably(config, options(2, quick())).await;
    let producer = Arc::new(producer);
    send_ids(&producer, 0..2).await;
    wait_session(&broker, 0, 2).await;
    let sender = Arc::clone(&producer);
    let blocked = std::thread::spawn(move || sender.send_blocking(b"third"));
    let waiting = Arc::clone(&producer);
    let waiting = tokio::spawn(async move { waiting.send(b"fourth").await });
    broker.act(Action::Drop);
    let refused = |r: Result<_, ClientError>| matches!(r, Err(ClientError::Refused { .. }));
    let blocked = blocked.join().unwrap();
    assert!(refused(blocked), "the blocked sender learns why");
    assert!(refused(waiting.await.unwrap()), "the waiting sender too");
    let all = exactly_once(&outcomes, 2);
    let closed = all.iter().all(|o| o.status == Closed);
    assert!(closed, "{all:?}");
    assert!(refused(producer.try_send(b"more").map_err(|e| match e {
        TrySendError::Failed(e) => e,
        other => panic!("closed, not {other:?}"),
    })));
    assert_eq!(broker.log().opens, 2, "no attempt after the refusal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_outage_is_reported_once_at_the_first_confirm_after_it() {
    let config = Config::default().with(|c| {
        (c.dedup, c.refuse_reopens) = (true, 1);
        c.reopen_refusal = Some(ErrorCode::NAME_IN_USE);
    });
    let (broker, producer, outcomes) = producing_reliably(config, options(8, quick())).await;
    let recoveries = recoveries(&producer);
    let recovered = || recoveries.lock().unwrap().clone();

    producer.send(b"before").await.unwrap();
    wait_outcomes(&outcomes, 1).await;
    assert!(recovered().is_empty(), "no outage yet");

    for (round, attempts) in [(1_usize, 2_u32), (2, 1)] {
        let dropped_at = Instant::now();
        broker.act(Action::Drop);
        let round_reconnected = || producer.stats().reconnects == round as u64;
        wait_until("the reconnect", round_reconnected).await;
        let ended = recovered().len();
        assert_eq!(
            ended,
            round - 1,
            "an outage ends with a confirm, not with the reconnect"
        );
        producer.send(b"after").await.unwrap();
        wait_outcomes(&outcomes, round + 1).await;
        let all = recovered();
        assert_eq!(all.len(), round, "one recovery per outage");
        let r = all[round - 1];
        let first_confirm = outcomes.lock().unwrap()[round].settled_at;
        assert_eq!(r.confirmed_at, first_confirm, "the first confirm after it");
        assert!(dropped_at <= r.lost_at && r.lost_at <= r.reconnected_at);
        assert!(r.reconnected_at <= r.confirmed_at);
        assert_eq!(r.time_to_confirm(), r.confirmed_at - r.lost_at);
        // The first reopen is refused (the name still held), so it took two connects.
        assert_eq!(r.attempts, attempts, "{r:?}");
    }
    producer.close().await;
    exactly_once(&outcomes, 3);
}

/// Stored 0, 1, 3, not 2, then a drop: the re-open's answer settles 0, 1, 3 id by id; 2 goes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_refused_below_the_highest_stored_is_resent_not_reported_stored() {
    let config = Config::holding().with(|c| (c.dedup, c.lose_id) = (true, Some(2)));
    let (broker, producer, outcomes) = producing_reliably(config, options(64, quick())).await;
    send_ids(&producer, 0..4).await;
    wait_session(&broker, 0, 4).await;
    assert_eq!(broker.stored(), [0, 1, 3]);
    broker.act(Action::Drop);
    wait_session(&broker, 1, 1).await;
    let again = &sessions(&broker)[1];
    assert_eq!(*again, [2], "only the message not stored goes again");
    let all = outcomes.lock().unwrap().clone();
    let settled: Vec<_> = all.iter().map(|o| o.publish_id.0).collect();
    assert_eq!(settled, [0, 1, 3], "settled by the re-open's answer: not 2");
    broker.act(Action::ConfirmHeld(Stored));
    wait_settled(&outcomes, 4, Stored).await;
    assert_eq!(broker.stored(), [0, 1, 3, 2]);
    assert_eq!(producer.stats().stored_before, 3);
    producer.close().await;
}

/// A permanent refusal is an outcome, once: neither resent nor taken for a lost connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_refused_too_large_is_reported_once_and_never_resent() {
    let config = Config::default().with(|c| c.policy = Policy::Confirm(ConfirmStatus::TooLarge));
    let (broker, producer, outcomes) = producing_reliably(config, options(64, quick())).await;
    send_ids(&producer, 0..5).await;
    wait_outcomes(&outcomes, 5).await;
    tokio::time::sleep(ms(50)).await;
    all_settled(&outcomes, 5, ConfirmStatus::TooLarge);
    assert_eq!(producer.stats().reconnects, 0);
    assert_eq!(sessions(&broker).len(), 1, "one session: nothing resent");
    producer.close().await;
}
