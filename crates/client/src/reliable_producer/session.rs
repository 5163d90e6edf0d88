//! Sessions: opening the session producer under the producer's name on a new connection,
//! and what the reconnect supervisor (`reconnect.rs`) does with this producer: settle
//! confirm timeouts while it waits, begin a session at each reconnect.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use zerodispatch_wire::ErrorCode;

use super::recovery::Outage;
use super::shared::Shared;
use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::ClientError;
use crate::options::ClientOptions;
use crate::producer::Producer;
use crate::reconnect::Supervised;

/// A session's producer (which keeps what the broker said it had stored of the name's
/// messages when it opened), and its number.
pub(super) struct Session {
    pub(super) producer: Producer,
    pub(super) generation: u64,
}

/// Opens the session producer under the producer's name; the broker says the highest
/// publish id it stored for the name.
pub(super) async fn open_session(
    client: &Client,
    shared: &Arc<Shared>,
) -> Result<Session, ClientError> {
    let generation = shared.state().generation + 1;
    // The same cap as the ring's, announced to the broker (whose limits count it), and the
    // same confirm timeout: a message the ring timed out (it counts from `send`, so first)
    // leaves the session at the session's own timeout even if the broker never answers.
    let options = shared.options.producer;
    let handler = Arc::clone(shared);
    let producer = client
        .open_named_producer(shared.queue, &shared.options.name, options, move |batch| {
            handler.on_session_outcomes(generation, batch);
        })
        .await?;
    Ok(Session {
        producer,
        generation,
    })
}

/// Whether an error at connecting or opening is worth another attempt: the connection's
/// failures and `NAME_IN_USE` are; the broker's other refusals and bad options are not.
pub(super) fn retryable(error: &ClientError) -> bool {
    match error {
        // The name is open: the lost session's producer may still be closing.
        ClientError::Refused { code, .. } => *code == ErrorCode::NAME_IN_USE,
        ClientError::InvalidOption { .. }
        | ClientError::PayloadTooLarge { .. }
        | ClientError::OverLimit { .. }
        | ClientError::IdsExhausted => false,
        ClientError::Protocol { .. } => false,
        _ => true,
    }
}

impl Supervised for Shared {
    type Session = Session;

    fn backoff(&self) -> &Backoff {
        &self.options.backoff
    }

    fn unless_closing<F: Future + Send>(
        &self,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send {
        self.run_timeouts_until(work)
    }

    fn session_ended<'a>(
        &'a self,
        client: &'a Client,
    ) -> Option<impl Future<Output = ()> + Send + 'a> {
        let session = self
            .state()
            .session
            .as_ref()
            .map(|p| Arc::clone(p.shared()))?;
        Some(async move {
            tokio::select! {
                _ = client.closed() => {}
                _ = session.wait_closed() => {}
            }
        })
    }

    async fn close(&self, client: Client) {
        let producer = self.state().session.take();
        if let Some(producer) = producer {
            // Its outcomes are the messages' (closing is set).
            let _ = producer.close().await;
        }
        self.settle_all(ClientError::Closed);
        client.close().await;
    }

    fn session_lost(&self, client: Client) {
        let producer = self.state().session.take();
        drop(producer);
        drop(client);
        // An outage begins, unless one lost again before a confirm goes on.
        let mut state = self.state();
        let lost_at = Instant::now();
        state.outage.get_or_insert(Outage {
            lost_at,
            attempts: 0,
            reconnected_at: None,
        });
    }

    fn client_options(&self) -> ClientOptions {
        self.options.client
    }

    async fn open_session(self: &Arc<Self>, client: &Client) -> Result<Session, ClientError> {
        self.max_payload
            .store(client.limits().max_payload, Ordering::Relaxed);
        open_session(client, self).await
    }

    fn reconnected(&self, session: Session, attempts: u32) {
        self.begin_session(session, Some(attempts));
    }

    /// The connection's failures and `NAME_IN_USE` are; the broker's other refusals and
    /// bad options are not.
    fn retryable(error: &ClientError) -> bool {
        retryable(error)
    }

    /// Settles every message without an outcome, and closes the producer with `error`
    /// (`Closed` when closing).
    fn give_up(&self, error: Option<ClientError>) {
        self.settle_all(error.unwrap_or(ClientError::Closed));
    }

    fn request_close(&self) {
        {
            let mut state = self.state();
            state.closing = true;
            state.closed.get_or_insert(ClientError::Closed);
        }
        self.wake.notify_one();
        self.wake_senders();
    }
}

impl Shared {
    /// Runs `work` (a wait, an attempt to connect) while settling confirm timeouts as they
    /// come; `None` if the producer is closing first (`work` is dropped).
    pub(super) async fn run_timeouts_until<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::pin!(work);
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.state().closing {
                return None;
            }
            let next = self.expire(Instant::now());
            tokio::select! {
                output = &mut work => return Some(output),
                () = &mut woken => {}
                () = sleep_until(next) => {}
            }
        }
    }
}

/// Sleeps until `at`, or for ever.
pub(super) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
