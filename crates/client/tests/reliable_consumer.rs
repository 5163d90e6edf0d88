//! The reliable consumer through drops and redeliveries: no duplicate handed, no message missed.

mod support;

use std::time::Duration;

use support::*;
use zerodispatch_client::{
    AppId, ClientError, DeliveryToken, QueueId, ReliableConsumer, ReliableConsumerOptions,
};

/// Options of `credit` (given back on confirms if `auto_credit`), reconnecting within 20 ms.
fn options(credit: u32, auto_credit: bool) -> ReliableConsumerOptions {
    ReliableConsumerOptions {
        consumer: support::credit(credit, auto_credit),
        client: quiet(),
        backoff: backoff(5, 20),
        window: 1024,
    }
}

/// A fake broker serving its shared queue, as `tune` changes the settings.
async fn shared_queue(tune: impl FnOnce(&mut Config)) -> FakeBroker {
    FakeBroker::start(Config::default().with(|c| c.shared_queue = true).with(tune)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drops_mid_delivery_hand_each_message_once() {
    let broker = shared_queue(|c| (c.drop_after_messages, c.drops) = (Some(30), 3)).await;
    const N: usize = 200;
    broker.enqueue((0..N).map(|i| format!("m{i}").into_bytes()));
    let (consumer, handed) =
        consuming_reliably(broker.addr, options(16, true), |b| b.confirm_all()).await;
    // A reconnect is counted once its reopen returned, maybe after deliveries: wait for all three.
    let done = || broker.all_confirmed() && consumer.stats().reconnects >= 3;
    wait_until("every message confirmed, three reconnects", done).await;
    let handed = handed.lock().unwrap().clone();
    assert_eq!(handed.len(), N, "no duplicate reached the application");
    assert_eq!(handed_payloads(&handed).len(), N, "every message once");
    let stats = consumer.stats();
    assert_eq!(stats.reconnects, 3);
    assert!(stats.duplicates_filtered > 0, "{stats:?}");
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_message_waits_for_the_applications_own_confirm() {
    let broker = shared_queue(|_| {}).await;
    broker.enqueue((0..10_u8).map(|i| vec![i]));
    let (consumer, handed) = consuming_reliably(broker.addr, options(10, false), |batch| {
        // Confirmed later, below; the first three right away.
        for message in batch.iter().filter(|m| m.payload[0] < 3) {
            batch.confirm(message.guid, message.token);
        }
    })
    .await;
    wait_until("10 handed", || handed.lock().unwrap().len() == 10).await;
    let confirmed = || broker.log().queue.iter().filter(|(_, c)| *c).count();
    wait_until("3 confirms sent", || confirmed() == 3).await;
    broker.act(Action::Drop);
    // Redeliveries can be filtered before the reconnect is counted (once reopened): wait for both.
    let redelivered = || {
        let stats = consumer.stats();
        stats.duplicates_filtered == 7 && stats.reconnects >= 1
    };
    wait_until("the redelivery and the reconnect counted", redelivered).await;
    assert_eq!(consumer.stats().reconnects, 1);
    assert_eq!(handed.lock().unwrap().len(), 10, "none handed twice");
    let frames = broker.frames();
    let reopen = frames
        .iter()
        .rposition(|f| matches!(f, Received::OpenConsumer { .. }));
    let since_reopen = frames[reopen.unwrap()..].iter();
    let confirms = since_reopen.filter(|f| matches!(f, Received::ConsumerConfirm { .. }));
    assert_eq!(confirms.count(), 0, "not confirmed for the application");
    // With the tokens of before the reconnect: the consumer confirms with the redelivery's.
    let handed = handed_tokens(&handed);
    for &(guid, token) in &handed[3..] {
        consumer.confirm(guid, token).unwrap();
    }
    wait_until("every message confirmed", || broker.all_confirmed()).await;
    assert_eq!(broker.log().bad_tokens, 0, "no stale token sent");
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_lost_with_the_connection_is_made_again() {
    let broker = shared_queue(|_| {}).await;
    broker.enqueue((0..5_u8).map(|i| vec![i]));
    // Reconnecting 240-300 ms after the loss, so the poll below sees it even under load.
    let mut slow = options(10, false);
    slow.backoff = backoff(300, 600);
    let (consumer, handed) = consuming_reliably(broker.addr, slow, |_| {}).await;
    wait_until("5 handed", || handed.lock().unwrap().len() == 5).await;
    broker.act(Action::Drop);
    wait_until("the loss", || !consumer.is_connected()).await;
    // Confirmed while reconnecting: remembered, and made on the redelivery.
    for (guid, token) in handed_tokens(&handed) {
        consumer.confirm(guid, token).unwrap();
    }
    wait_until("every message confirmed", || broker.all_confirmed()).await;
    assert_eq!(handed.lock().unwrap().len(), 5);
    assert_eq!(consumer.stats().duplicates_filtered, 5);
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_below_the_credit_is_refused() {
    let broker = FakeBroker::start(Config::default()).await;
    let mut bad = options(100, true);
    bad.window = 99;
    let error = ReliableConsumer::connect(broker.addr, QueueId(0), AppId(0), bad, |_| {});
    let error = error.await.unwrap_err();
    assert_eq!(invalid_option(&error), Some("window"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reopen_closes_the_consumer_with_why() {
    let broker = shared_queue(|c| c.refuse_consumer_reopens = true).await;
    let (consumer, _) = consuming_reliably(broker.addr, options(10, true), |_| {}).await;
    broker.act(Action::Drop);
    let confirm = || consumer.confirm(support::guid(0), DeliveryToken(0));
    wait_until("the refusal", || confirm().is_err()).await;
    let error = confirm().unwrap_err();
    assert!(matches!(error, ClientError::Refused { .. }), "{error}");
    assert!(!consumer.is_connected());
    let opens = broker.log().consumer_opens;
    assert_eq!(opens, 2, "no attempt after the refusal");
    tokio::time::timeout(Duration::from_secs(5), consumer.close())
        .await
        .expect("close returns");
}
