//! A consumer that survives losing its connection: it reconnects with backoff, re-opens
//! the same queue and app, and filters by GUID what it already handed the application.
//!
//! # How
//!
//! The broker gives what a lost session had been delivered and had not had confirmed back
//! to the queue, so the next session (this consumer's, or another's) gets it again. The
//! reliable consumer remembers the GUIDs it handed the application, the last `window` of
//! the current session's and of lost sessions' ([`GuidWindow`]), each with whether the
//! application confirmed it. A redelivered
//! message found there is a duplicate: it is not handed to the application again; if the
//! application had confirmed it (the confirm was lost with the connection), it is
//! confirmed again on the new session, and otherwise the application's own confirm, still
//! to come, goes to the new session.
//!
//! A confirm names the delivery's token as well as the GUID, and a token is good only on
//! the session that delivered it. So the window remembers, for each GUID, the token of its
//! last delivery on the current session: the application's confirm of a message it was
//! handed before a reconnect goes with the redelivery's token once the redelivery has
//! come (as a confirm by GUID alone confirmed it), and with the token it names until then
//! (which the new session refuses, confirming nothing; the redelivery, when it comes, is
//! confirmed then).

use std::collections::{HashMap, TryReserveError, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::ToSocketAddrs;
use tokio::sync::Notify;
use zerodispatch_wire::{AppId, DeliveryToken, Guid, MAX_MESSAGES_PER_FRAME, QueueId};

use crate::backoff::Backoff;
use crate::client::Client;
use crate::consumer::{Consumer, Deliveries, DeliveryHandler};
use crate::error::ClientError;
use crate::lock::lock;
use crate::options::{ClientOptions, ConsumerOptions};
use crate::reconnect::{self, Supervised, SupervisorTask};

/// How a reliable consumer behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReliableConsumerOptions {
    /// The session consumer's options (each session starts with `credit` again).
    pub consumer: ConsumerOptions,
    /// The connection's options.
    pub client: ClientOptions,
    /// The delays between attempts to reconnect.
    pub backoff: Backoff,
    /// The GUIDs remembered to filter duplicates, in two lists of `window` each (allocated
    /// when the consumer opens): the last `window` messages handed out on the current
    /// session, and the last `window` handed out on sessions lost since, which new
    /// deliveries do not push out (a redelivery is recognised however long the broker's
    /// backlog before it). A message is not recognised if more than `window` others were
    /// handed out after it on its session before the session was lost, or on sessions lost
    /// later: the window must cover what the application holds unconfirmed plus the
    /// session's credit. At least `credit`; default 65,536.
    pub window: usize,
}

impl Default for ReliableConsumerOptions {
    fn default() -> Self {
        Self {
            consumer: ConsumerOptions::default(),
            client: ClientOptions::default(),
            backoff: Backoff::default(),
            window: 1 << 16,
        }
    }
}

impl ReliableConsumerOptions {
    fn check(&self) -> Result<(), ClientError> {
        self.backoff.check()?;
        if self.window == 0 || self.window < self.consumer.credit as usize {
            return Err(ClientError::InvalidOption {
                option: "window",
                expected: "at least 1 and the consumer's credit",
            });
        }
        Ok(())
    }
}

/// A reliable consumer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReliableConsumerStats {
    /// Connections lost and opened again, counted once the reopen has returned (the new
    /// session's first deliveries may be handed, or filtered, before).
    pub reconnects: u64,
    /// Redelivered messages not handed to the application again.
    pub duplicates_filtered: u64,
}

/// A GUID remembered: whether the application confirmed it, the token of its last
/// delivery on the current session, and how many entries of the window's two lists name
/// it.
#[derive(Clone, Copy)]
struct Seen {
    confirmed: bool,
    /// The token its last delivery on the current session came with; `None` if it has not
    /// been delivered on the current session (a lost session's token is worth nothing on
    /// the next).
    token: Option<DeliveryToken>,
    /// At most `2 * cap`: one per entry of the two lists, each at most `cap` long. The
    /// broker drives it (each redelivery of a message the application holds lists it
    /// again), so it is a `usize` that this bound keeps from wrapping, never a narrower
    /// type a peer could wrap with enough reconnects.
    lists: usize,
}

/// The GUIDs handed to the application that may come again, with whether each was
/// confirmed, in two lists of `cap` each:
///
/// - `current`: the last `cap` handed out on the current session;
/// - `suspects`: the last `cap` handed out on sessions lost since (at a loss, the current
///   list moves there). New deliveries do not push them out, so a redelivery is recognised
///   however many messages the broker delivers before it (a broker may put what a lost
///   session held behind its backlog); only later losses do.
///
/// A duplicate found is handed out again on the current session, so it goes to `current`
/// too: if this session is lost as well, it is a suspect again.
struct GuidWindow {
    seen: HashMap<Guid, Seen>,
    current: VecDeque<Guid>,
    suspects: VecDeque<Guid>,
    cap: usize,
}

impl GuidWindow {
    fn new(cap: usize) -> Result<Self, TryReserveError> {
        let mut seen = HashMap::new();
        seen.try_reserve(2 * cap)?;
        let mut current = VecDeque::new();
        current.try_reserve_exact(cap)?;
        let mut suspects = VecDeque::new();
        suspects.try_reserve_exact(cap)?;
        Ok(Self {
            seen,
            current,
            suspects,
            cap,
        })
    }

    /// Whether `guid` was handed out (and confirmed) within the window.
    fn get(&self, guid: Guid) -> Option<bool> {
        self.seen.get(&guid).map(|s| s.confirmed)
    }

    /// Takes `guid` out of one list's count, forgetting it when it is in none.
    fn release(seen: &mut HashMap<Guid, Seen>, guid: Guid) {
        if let Some(entry) = seen.get_mut(&guid) {
            entry.lists -= 1;
            if entry.lists == 0 {
                seen.remove(&guid);
            }
        }
    }

    /// Remembers `guid` as handed out on the current session (again, for a duplicate),
    /// delivered with `token`, pushing out the oldest of `current` at the bound.
    fn insert(&mut self, guid: Guid, token: DeliveryToken) {
        if self.current.len() >= self.cap
            && let Some(old) = self.current.pop_front()
        {
            Self::release(&mut self.seen, old);
        }
        self.current.push_back(guid);
        let cap = self.cap;
        self.seen
            .entry(guid)
            .and_modify(|s| {
                s.lists += 1;
                s.token = Some(token);
                debug_assert!(s.lists <= 2 * cap, "one count per list entry");
            })
            .or_insert(Seen {
                confirmed: false,
                token: Some(token),
                lists: 1,
            });
    }

    /// Marks `guid` confirmed; returns the token of its delivery on the current session,
    /// if it had one within the window.
    fn confirmed(&mut self, guid: Guid) -> Option<DeliveryToken> {
        let entry = self.seen.get_mut(&guid)?;
        entry.confirmed = true;
        entry.token
    }

    /// The current session is lost: what it handed out becomes suspect, pushing out the
    /// oldest suspects at the bound.
    fn session_lost(&mut self) {
        while let Some(guid) = self.current.pop_front() {
            if let Some(entry) = self.seen.get_mut(&guid) {
                entry.token = None;
            }
            if self.suspects.len() >= self.cap
                && let Some(old) = self.suspects.pop_front()
            {
                Self::release(&mut self.seen, old);
            }
            self.suspects.push_back(guid);
        }
    }
}

struct State {
    session: Option<Consumer>,
    closing: bool,
    closed: Option<ClientError>,
    stats: ReliableConsumerStats,
}

struct Shared {
    options: ReliableConsumerOptions,
    queue: QueueId,
    app: AppId,
    state: Mutex<State>,
    window: Mutex<GuidWindow>,
    handler: Mutex<DeliveryHandler>,
    /// Wakes the supervisor to close.
    wake: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// A session's deliveries: the duplicates filtered out (and confirmed again if the
    /// application had confirmed them), the rest handed to the application.
    fn deliver(&self, deliveries: &Deliveries<'_>, skip: &mut [bool]) {
        let mut kept = 0;
        let mut duplicates = 0;
        {
            let mut window = lock(&self.window);
            for (index, message) in deliveries.iter().enumerate() {
                let duplicate = match window.get(message.guid) {
                    Some(confirmed) => {
                        if confirmed {
                            deliveries.consumer.confirm(message.guid, message.token);
                        }
                        window.insert(message.guid, message.token);
                        true
                    }
                    None => {
                        window.insert(message.guid, message.token);
                        false
                    }
                };
                skip[index] = duplicate;
                duplicates += u64::from(duplicate);
                kept += usize::from(!duplicate);
            }
        }
        if duplicates > 0 {
            self.state().stats.duplicates_filtered += duplicates;
        }
        if kept == 0 {
            return;
        }
        let on_confirm = |guid| lock(&self.window).confirmed(guid);
        let filtered = Deliveries {
            frame: deliveries.frame,
            consumer: deliveries.consumer,
            skip: &skip[..deliveries.len()],
            len: kept,
            on_confirm: Some(&on_confirm),
        };
        let mut handler = lock(&self.handler);
        (*handler)(&filtered);
    }
}

impl Supervised for Shared {
    type Session = Consumer;

    fn backoff(&self) -> &Backoff {
        &self.options.backoff
    }

    async fn unless_closing<F: Future + Send>(&self, work: F) -> Option<F::Output> {
        let woken = self.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if self.state().closing {
            return None;
        }
        tokio::select! {
            output = work => Some(output),
            () = woken => None,
        }
    }

    fn session_ended<'a>(
        &'a self,
        client: &'a Client,
    ) -> Option<impl Future<Output = ()> + Send + 'a> {
        Some(async move {
            client.closed().await;
        })
    }

    async fn close(&self, client: Client) {
        let session = self.state().session.take();
        if let Some(session) = session {
            let _ = session.close().await;
        }
        client.close().await;
    }

    fn session_lost(&self, client: Client) {
        let session = self.state().session.take();
        // The session's deliveries have all been handled: the I/O task ends last.
        lock(&self.window).session_lost();
        drop(session);
        drop(client);
    }

    fn client_options(&self) -> ClientOptions {
        self.options.client
    }

    async fn open_session(self: &Arc<Self>, client: &Client) -> Result<Consumer, ClientError> {
        let deliver = Arc::clone(self);
        let mut skip = vec![false; MAX_MESSAGES_PER_FRAME as usize];
        client
            .open_consumer(
                self.queue,
                self.app,
                self.options.consumer,
                move |deliveries| deliver.deliver(deliveries, &mut skip),
            )
            .await
    }

    fn reconnected(&self, session: Consumer, _attempts: u32) {
        let mut state = self.state();
        state.session = Some(session);
        state.stats.reconnects += 1;
    }

    /// The queue or the app is gone (`Refused`), or the broker speaks otherwise
    /// (`Protocol`): no attempt will do better. Any other error is.
    fn retryable(error: &ClientError) -> bool {
        !matches!(
            error,
            ClientError::Refused { .. } | ClientError::Protocol { .. }
        )
    }

    /// The consumer is closed with why.
    fn give_up(&self, error: Option<ClientError>) {
        if let Some(error) = error {
            self.state().closed = Some(error);
        }
    }

    fn request_close(&self) {
        {
            let mut state = self.state();
            state.closing = true;
            state.closed.get_or_insert(ClientError::Closed);
        }
        self.wake.notify_one();
    }
}

/// A consumer that survives losing its connection, opened by
/// [`ReliableConsumer::connect`].
///
/// It has its own connection. On losing it, it reconnects with exponential backoff and
/// jitter, re-opens the same queue and app, and hands the application no message twice:
/// the broker redelivers what the lost session had not had confirmed, and the consumer
/// filters by GUID what it already handed out, within its window
/// ([`ReliableConsumerOptions::window`]).
///
/// ```no_run
/// use zerodispatch_client::{ReliableConsumer, ReliableConsumerOptions};
/// use zerodispatch_wire::{AppId, QueueId};
///
/// # async fn run() -> Result<(), zerodispatch_client::ClientError> {
/// let options = ReliableConsumerOptions::default();
/// let consumer = ReliableConsumer::connect("127.0.0.1:7878", QueueId(0), AppId(0), options, |batch| {
///     for message in batch.iter() {
///         println!("{} bytes", message.payload.len());
///     }
///     batch.confirm_all();
/// })
/// .await?;
/// // ...
/// consumer.close().await;
/// # Ok(())
/// # }
/// ```
pub struct ReliableConsumer {
    shared: Arc<Shared>,
    supervisor: SupervisorTask<Shared>,
}

impl ReliableConsumer {
    /// Connects to the broker at `addr` and opens a consumer of `app` on `queue`; returns
    /// once the first session is open (a first connection that fails is an error, not
    /// retried).
    ///
    /// `on_deliver` is called as for [`Client::open_consumer`], with the duplicates left
    /// out (a batch of duplicates only is not handed over). It must not block; confirms
    /// made through the [`Deliveries`] or [`confirm`](Self::confirm) are remembered for
    /// the filter.
    ///
    /// `addr` is a [`tokio::net::ToSocketAddrs`] as in [`Client::connect`] (resolved on the
    /// runtime, without blocking it), kept (`Clone`) to connect again after a loss.
    ///
    /// # Errors
    ///
    /// An option out of range, the window too large to allocate, the broker's refusal, or
    /// why the connection failed.
    pub async fn connect<A>(
        addr: A,
        queue: QueueId,
        app: AppId,
        options: ReliableConsumerOptions,
        on_deliver: impl FnMut(&Deliveries<'_>) + Send + 'static,
    ) -> Result<Self, ClientError>
    where
        A: ToSocketAddrs + Clone + Send + Sync + 'static,
    {
        options.check()?;
        let window = GuidWindow::new(options.window).map_err(|_| ClientError::InvalidOption {
            option: "window",
            expected: "a window that fits in memory",
        })?;
        let shared = Arc::new(Shared {
            options,
            queue,
            app,
            state: Mutex::new(State {
                session: None,
                closing: false,
                closed: None,
                stats: ReliableConsumerStats::default(),
            }),
            window: Mutex::new(window),
            handler: Mutex::new(Box::new(on_deliver)),
            wake: Notify::new(),
        });
        let (client, session) = reconnect::connect(&shared, addr.clone()).await?;
        shared.state().session = Some(session);
        let supervisor = SupervisorTask::spawn(&shared, addr, client);
        Ok(Self { shared, supervisor })
    }

    /// Confirms a delivered message, by its GUID and the token it was handed out with, on
    /// the current session (with one credit back, with `auto_credit`). While reconnecting
    /// the confirm is remembered: the message, when redelivered, is confirmed again (with
    /// the redelivery's token) and not handed out. A message handed out before a
    /// reconnect and redelivered since is confirmed with the redelivery's token, which the
    /// window remembers; one not redelivered yet is confirmed with `token`, which the new
    /// session refuses ([`Consumer::take_refusal`]), and then when it comes.
    ///
    /// # Errors
    ///
    /// Why the consumer is closed: closed by its handle, or a re-open refused (the queue
    /// or the app is gone), after which it does not reconnect.
    pub fn confirm(&self, guid: Guid, token: DeliveryToken) -> Result<(), ClientError> {
        let state = self.shared.state();
        if let Some(error) = &state.closed {
            return Err(error.clone());
        }
        let current = lock(&self.shared.window).confirmed(guid);
        if let Some(session) = &state.session {
            let _ = session.confirm(guid, current.unwrap_or(token));
        }
        Ok(())
    }

    /// Whether a session is open now (false while reconnecting).
    pub fn is_connected(&self) -> bool {
        self.shared.state().session.is_some()
    }

    /// The counters: reconnects, duplicates filtered.
    pub fn stats(&self) -> ReliableConsumerStats {
        self.shared.state().stats
    }

    /// Closes the consumer: its confirms are sent, then the session closes; returns when it
    /// has (the handler is called no more).
    pub async fn close(self) {
        self.supervisor.close().await;
    }
}

impl std::fmt::Debug for ReliableConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableConsumer")
            .field("queue", &self.shared.queue)
            .field("app", &self.shared.app)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guid(n: u8) -> Guid {
        Guid([n; 16])
    }

    #[test]
    fn a_lost_sessions_guids_outlive_new_deliveries() {
        let mut window = GuidWindow::new(2).unwrap();
        window.insert(guid(1), DeliveryToken(1));
        window.insert(guid(2), DeliveryToken(2));
        window.confirmed(guid(1));
        window.session_lost();
        for n in 10..20 {
            window.insert(guid(n), DeliveryToken(u32::from(n)));
        }
        assert_eq!(window.get(guid(1)), Some(true), "suspect, and confirmed");
        assert_eq!(window.get(guid(2)), Some(false));
        assert_eq!(window.get(guid(10)), None, "pushed out of the current list");
        // A duplicate handed out again is current too: a second loss keeps it.
        window.insert(guid(2), DeliveryToken(2));
        window.session_lost();
        assert_eq!(window.get(guid(2)), Some(false));
        assert_eq!(window.get(guid(19)), Some(false));
        assert_eq!(window.get(guid(1)), None, "pushed out by the later loss");
        assert!(window.seen.len() <= 4, "two lists of two");
    }

    /// Issue: the count of a GUID's list entries was a `u8`. A message the application
    /// holds is redelivered after each reconnect and listed again; after 256 of them the
    /// count wrapped and the GUID was forgotten (handed to the application twice), or a
    /// debug build panicked in the delivery handler.
    #[test]
    fn a_guid_redelivered_after_many_reconnects_is_still_known() {
        let mut window = GuidWindow::new(1024).unwrap();
        window.insert(guid(1), DeliveryToken(1));
        for reconnect in 0..600 {
            window.session_lost();
            assert_eq!(window.get(guid(1)), Some(false), "reconnect {reconnect}");
            // The broker redelivers it; the consumer finds the duplicate and lists it again.
            window.insert(guid(1), DeliveryToken(1));
        }
        assert_eq!(window.get(guid(1)), Some(false));
        window.confirmed(guid(1));
        assert_eq!(window.get(guid(1)), Some(true));
    }

    #[test]
    fn a_confirm_uses_the_current_sessions_token_once_redelivered() {
        let mut window = GuidWindow::new(16).unwrap();
        window.insert(guid(1), DeliveryToken(5));
        window.insert(guid(2), DeliveryToken(6));
        window.session_lost();
        // Not redelivered yet: no token of the new session is known.
        assert_eq!(window.confirmed(guid(1)), None);
        // Redelivered with a token of the new session: a confirm goes with it.
        window.insert(guid(2), DeliveryToken(0));
        assert_eq!(window.confirmed(guid(2)), Some(DeliveryToken(0)));
        assert_eq!(window.confirmed(guid(3)), None, "never handed out");
    }
}
