//! A consumer's session: it collects the PUSHes of its queue, hands them to its application
//! on flush, and confirms them (at once, or when the application says), paced by credit.

use std::collections::{HashMap, TryReserveError};
use std::hash::BuildHasherDefault;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use zerodispatch_core::{Client, ClientEvent, ClientHandle, Context, DispatchError, Event};

use crate::credits::Credits;
use crate::ids::{AppId, ConsumerId, Guid, GuidHasher, QueueId};
use crate::message::{Confirm, ConfirmMode, Confirms, Delivery, DeliveryToken};
use crate::protocol::BrokerMsg;
use crate::queue::send_confirm;
use crate::stats::SessionTally;
use crate::tables;

use super::DeliveryHandler;

/// A consumer's session.
pub(crate) struct ConsumerSession {
    pub(crate) id: ConsumerId,
    pub(crate) app: AppId,
    /// Its queue's id, which its confirms name.
    queue_id: QueueId,
    /// Its queue's client, which its confirms go to.
    pub(crate) queue: ClientHandle,
    /// For a consumer whose confirms go through the cluster: the cluster's client, and the
    /// credits each confirm takes before it goes (see `cluster.rs`, "Back-pressure").
    cluster: Option<(ClientHandle, Arc<Credits>)>,
    pub(crate) mode: ConfirmMode,
    confirms: Confirms,
    /// Deliveries the application may still be handed (`None`: no limit but the queue's
    /// window).
    credit: Option<u64>,
    /// PUSHes received and not yet handed to the application: at most a flush's worth (the
    /// processor's `max_batch`), or, for a consumer paced by credit, the queue's window.
    deliveries: Vec<Delivery>,
    /// The batch being delivered, taken out of `deliveries` before `on_delivery` runs; at
    /// most `max_batch`, and empty outside `flush`.
    delivering: Vec<Delivery>,
    /// `Confirms::Explicit`: what the application was handed and has not confirmed yet, by
    /// GUID (the application confirms by GUID), with each delivery's token, which its
    /// confirm names to the queue. At most the window (preallocated for twice that, so
    /// inserting never allocates).
    unconfirmed: HashMap<Guid, DeliveryToken, BuildHasherDefault<GuidHasher>>,
    /// The window `unconfirmed` is sized for.
    unconfirmed_limit: usize,
    /// Confirms that could not go yet (a full outbox, `DispatchError::Full`, or no cluster
    /// credit free), oldest first: sent before any other at the next flush, which the
    /// session asks for (`flush_again`). Each is an unconfirmed share of the consumer's
    /// window, as is each delivery, so together they never exceed the window (the
    /// preallocated size).
    unsent: Vec<Confirm>,
    on_delivery: DeliveryHandler,
    /// Whether the queue has the consumer's `Attach` (or has it coming before anything
    /// the session sends it). Opened from an application thread, the opener sends the
    /// `Attach` itself, straight into the queue's FIFO before `open_consumer` returns
    /// (true from the start); opened on a processor thread, where the opener's dispatch
    /// could wait in its outbox and be overtaken, the session sends it at its first flush,
    /// before its `Detach` can go.
    pub(crate) attached: bool,
    stage: Stage,
    pub(crate) counters: SessionTally,
}

/// Where a consumer session is in its life. A closed session's last steps, each retried at
/// the next flush while a full outbox refuses it: the detach, by the confirms' own path
/// (straight to the queue, or through the cluster) after every confirm kept in `unsent`,
/// so that it cannot overtake one; then its own unregistration (unregistered earlier, by
/// the closing thread, it could be dropped with confirms or the detach still kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Open,
    /// Closed; the queue not yet told to detach the consumer.
    Detaching,
    /// Detached; not yet unregistered.
    Unregistering,
    /// Unregistered: dropped once its processor handles that.
    Closed,
}

/// How a consumer session confirms and paces its deliveries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pacing {
    /// When its deliveries are confirmed.
    pub(crate) confirms: Confirms,
    /// Its first credit (`None`: not paced by credit).
    pub(crate) credit: Option<u32>,
    /// The most it receives between two flushes (the processor's `max_batch`, and no more
    /// than `window`).
    pub(crate) batch: usize,
    /// The most shares it can hold unconfirmed (the queue's window, or its capacity if
    /// less).
    pub(crate) window: usize,
}

impl ConsumerSession {
    /// A consumer session whose tables are preallocated for `pacing`'s batch and window.
    ///
    /// # Errors
    ///
    /// The allocation failed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: ConsumerId,
        app: AppId,
        (queue_id, queue): (QueueId, ClientHandle),
        cluster: Option<(ClientHandle, Arc<Credits>)>,
        mode: ConfirmMode,
        pacing: Pacing,
        on_delivery: DeliveryHandler,
        counters: SessionTally,
    ) -> Result<Self, TryReserveError> {
        let Pacing {
            confirms,
            credit,
            batch,
            window,
        } = pacing;
        debug_assert!(batch <= window);
        // Paced by credit, the session may hold every share the queue lets it have while
        // it waits for credit.
        let held = if credit.is_some() { window } else { batch };
        let mut unconfirmed = HashMap::default();
        if confirms == Confirms::Explicit {
            // Twice the window: hashbrown then rehashes its tombstones in place rather than
            // growing (it grows only when more than half full and out of room), so that
            // inserting after many removals never allocates.
            unconfirmed.try_reserve(2 * window)?;
        }
        Ok(Self {
            id,
            app,
            queue_id,
            queue,
            cluster,
            mode,
            confirms,
            credit: credit.map(u64::from),
            deliveries: tables::vec(held)?,
            delivering: tables::vec(batch)?,
            unconfirmed,
            unconfirmed_limit: window,
            unsent: tables::vec(window)?,
            on_delivery,
            attached: false,
            stage: Stage::Open,
            counters,
        })
    }

    /// Tells the queue to attach the consumer; `false` if a full outbox refused it (the
    /// caller tries again at the next flush). Sent by the session itself, at its first
    /// flush, whatever event brought it there (`Open` from the opener, or a close, a credit
    /// or a confirm that overtook it from another thread): so the attach goes before the
    /// session's own detach, from the same processor, in order. Sent by the opener instead,
    /// through its own outbox, the attach could reach the queue after the detach of a
    /// close made meanwhile from another thread, and attach a closed consumer whose
    /// shares were then never redelivered. Refused at shutdown: the queue is going too.
    fn send_attach(&self, ctx: &Context<BrokerMsg>) -> bool {
        let attach = BrokerMsg::Attach {
            consumer: self.id,
            app: self.app,
            session: ctx.handle(),
        };
        !matches!(
            ctx.dispatcher()
                .dispatch(self.queue, Event::Message(attach)),
            Err(DispatchError::Full(_))
        )
    }

    /// Sends one confirm, straight to its queue or through the cluster; `false` if it
    /// cannot go yet (a full outbox, or no cluster credit free): the caller keeps it. A
    /// confirm refused at shutdown is counted and dropped: the queue is going too.
    fn confirm(&self, c: Confirm, ctx: &Context<BrokerMsg>) -> bool {
        let sent = match &self.cluster {
            Some((cluster, credits)) => {
                if !credits.try_take() {
                    return false;
                }
                let sent = ctx
                    .dispatcher()
                    .dispatch(*cluster, Event::Message(BrokerMsg::Route(c, self.mode)));
                if sent.is_err() {
                    credits.give_back(1);
                }
                sent
            }
            None => send_confirm(ctx.dispatcher(), self.queue, c, self.mode),
        };
        match sent {
            Ok(()) => {
                self.counters.confirms_sent.add(1);
                true
            }
            Err(DispatchError::Full(_)) => false,
            Err(_) => {
                self.counters.confirms_refused.add(1);
                true
            }
        }
    }

    /// Tells the queue to detach the consumer, by the confirms' path; `false` if a full
    /// outbox refused it (the caller tries again at the next flush). Refused at shutdown:
    /// the queue is going too.
    fn send_detach(&self, ctx: &Context<BrokerMsg>) -> bool {
        let (to, message) = match &self.cluster {
            Some((cluster, _)) => (
                *cluster,
                BrokerMsg::RouteDetach {
                    queue: self.queue_id,
                    consumer: self.id,
                },
            ),
            None => (self.queue, BrokerMsg::Detach { consumer: self.id }),
        };
        !matches!(
            ctx.dispatcher().dispatch(to, Event::Message(message)),
            Err(DispatchError::Full(_))
        )
    }

    /// Confirms a delivery now, or keeps the confirm behind those already kept.
    fn confirm_or_keep(&mut self, guid: Guid, token: DeliveryToken, ctx: &Context<BrokerMsg>) {
        let c = Confirm {
            queue: self.queue_id,
            guid,
            token,
            consumer: self.id,
            app: self.app,
        };
        // Once one is refused, the rest wait behind it.
        if !self.unsent.is_empty() || !self.confirm(c, ctx) {
            debug_assert!(self.unsent.len() < self.unsent.capacity());
            self.unsent.push(c);
        }
    }

    /// Sends the confirms kept by earlier flushes, oldest first, until one is refused;
    /// `true` if some are still kept.
    fn send_unsent(&mut self, ctx: &Context<BrokerMsg>) -> bool {
        let mut sent = 0;
        while sent < self.unsent.len() && self.confirm(self.unsent[sent], ctx) {
            sent += 1;
        }
        // Slides the rest down: no allocation.
        self.unsent.drain(..sent);
        !self.unsent.is_empty()
    }

    /// How many of the held deliveries the application may be handed now.
    fn handable(&self) -> usize {
        let mut n = self.deliveries.len().min(self.delivering.capacity());
        if let Some(credit) = self.credit {
            n = n.min(usize::try_from(credit).unwrap_or(usize::MAX));
        }
        n
    }

    /// An application's confirm (`Confirms::Explicit`): confirmed if the session handed
    /// that message over and it is not confirmed yet; counted and dropped otherwise.
    fn app_confirm(&mut self, guid: Guid, ctx: &Context<BrokerMsg>) {
        let token = match self.stage {
            Stage::Open => self.unconfirmed.remove(&guid),
            _ => None,
        };
        let Some(token) = token else {
            self.counters.unknown_confirms.add(1);
            return;
        };
        self.confirm_or_keep(guid, token, ctx);
    }
}

impl Client<BrokerMsg> for ConsumerSession {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, ctx: &mut Context<BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Push {
                consumer,
                slot,
                guid,
                payload,
            }) => {
                if self.stage != Stage::Open || consumer != self.id {
                    self.counters.pushes_to_closed.add(1);
                    return;
                }
                debug_assert!(self.deliveries.len() < self.deliveries.capacity());
                self.deliveries.push(Delivery {
                    guid,
                    token: slot,
                    queue: self.queue_id,
                    app: self.app,
                    payload,
                });
            }
            ClientEvent::Message(BrokerMsg::AppConfirm { consumer, guid })
                if consumer == self.id =>
            {
                self.app_confirm(guid, ctx);
            }
            ClientEvent::Message(BrokerMsg::Credit { consumer, credit }) if consumer == self.id => {
                if let Some(have) = &mut self.credit {
                    *have = have.saturating_add(u64::from(credit));
                }
            }
            // The opener's first word: its flush attaches the consumer (`send_attach`).
            ClientEvent::Message(BrokerMsg::Open { consumer }) if consumer == self.id => {}
            ClientEvent::Message(BrokerMsg::Close) => {
                // The confirms already made stay in `unsent` (they go at the flush this
                // event brings, with the detach behind them).
                if self.stage == Stage::Open {
                    self.stage = Stage::Detaching;
                }
                self.deliveries.clear();
                self.unconfirmed.clear();
            }
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => tracing::warn!(
                consumer = self.id.0,
                ?other,
                "unexpected message for a consumer"
            ),
        }
    }

    fn flush(&mut self, ctx: &mut Context<BrokerMsg>) {
        // The attach before anything else: nothing of the consumer's reaches its queue
        // before it (and no share comes before the queue has it).
        if !self.attached {
            if !self.send_attach(ctx) {
                ctx.flush_again();
                return;
            }
            self.attached = true;
        }
        // Confirms kept at an earlier flush go first, in order.
        self.send_unsent(ctx);
        let n = self.handable();
        if n > 0 {
            // Take the batch out first (see `session.rs`, "Calling the application").
            debug_assert!(
                self.delivering.is_empty(),
                "a batch left from the last flush"
            );
            self.delivering.extend(self.deliveries.drain(..n));
            if let Some(credit) = &mut self.credit {
                *credit -= n as u64;
            }
            self.counters.delivered.add(n as u64);
            let (on_delivery, batch) = (&mut self.on_delivery, &self.delivering);
            if catch_unwind(AssertUnwindSafe(|| on_delivery(batch))).is_err() {
                self.counters.handler_panics.add(1);
                tracing::warn!(
                    consumer = self.id.0,
                    deliveries = batch.len(),
                    "on_delivery panicked; its messages count as delivered"
                );
            }
            for i in 0..n {
                let d = self.delivering[i];
                match self.confirms {
                    Confirms::OnReturn => self.confirm_or_keep(d.guid, d.token, ctx),
                    Confirms::Explicit => {
                        // At most the window: the queue pushes no more unconfirmed. (Not
                        // `capacity()`, which tombstones lower until the next rehash.)
                        debug_assert!(self.unconfirmed.len() < 2 * self.unconfirmed_limit);
                        self.unconfirmed.insert(d.guid, d.token);
                    }
                }
            }
            self.delivering.clear();
        }
        // Closed: the detach, behind every confirm, then the session's own unregistration.
        if self.stage == Stage::Detaching && self.unsent.is_empty() && self.send_detach(ctx) {
            self.stage = Stage::Unregistering;
        }
        if self.stage == Stage::Unregistering {
            // Refused only by a full outbox (retried at the next flush), or at shutdown
            // (which drops the session anyway).
            let me = ctx.handle();
            if !matches!(ctx.dispatcher().unregister(me), Err(DispatchError::Full(_))) {
                self.stage = Stage::Closed;
            }
        }
        // Kept confirms, a last step, or deliveries the credit allows that did not fit this
        // batch.
        let ending = matches!(self.stage, Stage::Detaching | Stage::Unregistering);
        if !self.unsent.is_empty() || ending || self.handable() > 0 {
            ctx.flush_again();
        }
    }
}
