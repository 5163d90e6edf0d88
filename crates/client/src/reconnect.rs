//! The reconnect supervisor that a [`ReliableProducer`](crate::ReliableProducer) and a
//! [`ReliableConsumer`](crate::ReliableConsumer) share: one task per reliable handle that
//! runs its sessions, one connection each, until the handle closes.
//!
//! # The loop
//!
//! 1. Wait for the current session's end, unless the handle closes first.
//! 2. Closing: close the session and its connection; the task ends.
//! 3. Lost: the handle takes the session back ([`Supervised::session_lost`]) and the
//!    connection is dropped.
//! 4. Reconnect by the handle's [`Backoff`]: wait the next delay, then connect and open a
//!    session, each unless the handle closes first (then it gives up, closed).
//!    - Opened: the handle begins the session ([`Supervised::reconnected`]); back to 1.
//!    - An error worth another attempt ([`Supervised::retryable`]): 4 again.
//!    - Any other error: the handle gives up with it; the task ends.
//!
//! What differs between the two handles is behind [`Supervised`]: a producer keeps settling
//! confirm timeouts while it waits, and resends at a new session; a consumer marks what a
//! lost session handed out as suspect, to filter redeliveries.

use std::future::Future;
use std::sync::Arc;

use tokio::net::ToSocketAddrs;
use tokio::task::JoinHandle;

use crate::backoff::{Backoff, Jitter};
use crate::client::Client;
use crate::error::ClientError;
use crate::options::ClientOptions;

/// A reliable handle's shared part, as its supervisor drives it.
pub(crate) trait Supervised: Send + Sync + 'static {
    /// What a new connection opens for the handle: its session producer or consumer.
    type Session: Send;

    /// The delays between attempts to reconnect.
    fn backoff(&self) -> &Backoff;

    /// Runs `work` (a wait, an attempt to connect); `None` if the handle is closing first
    /// (`work` is dropped).
    fn unless_closing<F: Future + Send>(
        &self,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send;

    /// The end of the current session on `client`; `None` if there is no session.
    fn session_ended<'a>(
        &'a self,
        client: &'a Client,
    ) -> Option<impl Future<Output = ()> + Send + 'a>;

    /// The handle is closing: closes the current session, then `client`.
    fn close(&self, client: Client) -> impl Future<Output = ()> + Send;

    /// The current session was lost: takes it back, and drops `client`.
    fn session_lost(&self, client: Client);

    /// The options of each connection the handle makes.
    fn client_options(&self) -> ClientOptions;

    /// Opens a session on `client`, a new connection.
    fn open_session(
        self: &Arc<Self>,
        client: &Client,
    ) -> impl Future<Output = Result<Self::Session, ClientError>> + Send;

    /// A session opened after a loss, at the `attempts`th attempt to connect.
    fn reconnected(&self, session: Self::Session, attempts: u32);

    /// Whether an error at connecting or opening is worth another attempt.
    fn retryable(error: &ClientError) -> bool;

    /// The supervisor stops reconnecting: closing (`None`), or for `error`, which no
    /// attempt will do better on.
    fn give_up(&self, error: Option<ClientError>);

    /// The handle asks to close: marks it closing (closed, unless it is already for another
    /// reason) and wakes the supervisor, and whoever else waits on the handle.
    fn request_close(&self);
}

/// A reliable handle's supervisor task. [`close`](Self::close) asks the handle's shared
/// part to close and waits for the task's end; dropped before, it only asks.
pub(crate) struct SupervisorTask<S: Supervised> {
    shared: Arc<S>,
    /// `None` once [`close`](Self::close) has taken it.
    task: Option<JoinHandle<()>>,
}

impl<S: Supervised> SupervisorTask<S> {
    /// Spawns the supervisor of `shared`, whose first session is on `client`.
    pub(crate) fn spawn<A>(shared: &Arc<S>, addr: A, client: Client) -> Self
    where
        A: ToSocketAddrs + Clone + Send + Sync + 'static,
    {
        Self {
            shared: Arc::clone(shared),
            task: Some(tokio::spawn(supervise(Arc::clone(shared), addr, client))),
        }
    }

    /// Asks the handle to close, and returns when the supervisor has closed it.
    pub(crate) async fn close(mut self) {
        self.shared.request_close();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl<S: Supervised> Drop for SupervisorTask<S> {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.shared.request_close();
        }
    }
}

/// Connects to `addr` and opens a session of `handle` there: the first one, and each after
/// a loss.
pub(crate) async fn connect<S: Supervised, A: ToSocketAddrs>(
    handle: &Arc<S>,
    addr: A,
) -> Result<(Client, S::Session), ClientError> {
    let client = Client::connect(addr, handle.client_options()).await?;
    let session = handle.open_session(&client).await?;
    Ok((client, session))
}

/// The supervisor: runs `handle`'s sessions, the first on `client`, until it closes or
/// gives up (the loop of the module's doc).
pub(crate) async fn supervise<S, A>(handle: Arc<S>, addr: A, mut client: Client)
where
    S: Supervised,
    A: ToSocketAddrs + Clone + Send + Sync + 'static,
{
    let mut jitter = Jitter::new();
    loop {
        // A session is on: wait for its end, or the close.
        let Some(ended) = handle.session_ended(&client) else {
            return;
        };
        if handle.unless_closing(ended).await.is_none() {
            handle.close(client).await;
            return;
        }
        handle.session_lost(client);
        // Reconnect, by the backoff, until a session opens or the handle closes.
        let mut attempt = 0;
        client = loop {
            let delay = handle.backoff().delay(attempt, jitter.next());
            attempt = attempt.saturating_add(1);
            if handle
                .unless_closing(tokio::time::sleep(delay))
                .await
                .is_none()
            {
                handle.give_up(None);
                return;
            }
            match handle.unless_closing(connect(&handle, addr.clone())).await {
                None => {
                    handle.give_up(None);
                    return;
                }
                Some(Ok((client, session))) => {
                    handle.reconnected(session, attempt);
                    break client;
                }
                Some(Err(error)) if S::retryable(&error) => {}
                Some(Err(error)) => {
                    handle.give_up(Some(error));
                    return;
                }
            }
        };
    }
}
