//! What a connection's handles share with its I/O task: the requests waiting for the task,
//! the task's wake-up, and how the connection ended.
//!
//! Handles ([`Client`](crate::Client), [`Producer`](crate::Producer),
//! [`Consumer`](crate::Consumer)) queue [`Command`]s and wake the task; the task takes them
//! all at the top of each turn of its loop. When the task ends it records why, under the
//! same lock, and fails every command still queued: a command queued after that is refused
//! at once. So no request waits for a task that is gone.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use zerodispatch_wire::{ConsumerId, ProducerId, ServerLimits};

use crate::command::Command;
use crate::error::ClientError;
use crate::lock::lock;

/// The state behind the lock.
struct Control {
    /// Requests the task has not taken yet.
    commands: VecDeque<Command>,
    /// Why the connection ended; `None` while the task runs. Set once, by the task.
    ended: Option<ClientError>,
    /// The next producer and consumer ids to hand out; never reused on a connection.
    next_producer: u32,
    next_consumer: u32,
}

/// A connection's shared part.
pub(crate) struct Connection {
    /// Wakes the I/O task: a command is queued, or a producer or consumer has something to
    /// send. A wake while the task is busy is kept (one permit) for its next wait. Shared
    /// with each producer and consumer of the connection.
    pub(crate) wake: Arc<Notify>,
    /// Woken when the connection ends.
    ended: Notify,
    control: Mutex<Control>,
    /// The broker's limits, from its `Welcome`.
    pub(crate) limits: ServerLimits,
}

impl Connection {
    pub(crate) fn new(limits: ServerLimits) -> Self {
        Self {
            limits,
            wake: Arc::new(Notify::new()),
            ended: Notify::new(),
            control: Mutex::new(Control {
                commands: VecDeque::with_capacity(16),
                ended: None,
                next_producer: 1,
                next_consumer: 1,
            }),
        }
    }

    /// Queues `command` and wakes the task.
    ///
    /// # Errors
    ///
    /// The connection has ended: the command is failed with the reason (its waiter
    /// answered), which is returned too.
    pub(crate) fn command(&self, command: Command) -> Result<(), ClientError> {
        let mut control = lock(&self.control);
        if let Some(error) = &control.ended {
            let error = error.clone();
            drop(control);
            command.fail(&error);
            return Err(error);
        }
        control.commands.push_back(command);
        drop(control);
        self.wake.notify_one();
        Ok(())
    }

    /// Moves the queued commands to `into` (the task's own queue: no allocation once both
    /// have grown to the most commands queued at once).
    pub(crate) fn take_commands(&self, into: &mut VecDeque<Command>) {
        let mut control = lock(&self.control);
        if !control.commands.is_empty() {
            std::mem::swap(&mut control.commands, into);
        }
    }

    /// A new producer id.
    pub(crate) fn producer_id(&self) -> ProducerId {
        let mut control = lock(&self.control);
        let id = control.next_producer;
        control.next_producer = id.wrapping_add(1).max(1);
        ProducerId(id)
    }

    /// A new consumer id.
    pub(crate) fn consumer_id(&self) -> ConsumerId {
        let mut control = lock(&self.control);
        let id = control.next_consumer;
        control.next_consumer = id.wrapping_add(1).max(1);
        ConsumerId(id)
    }

    /// Records why the connection ended (the first reason wins), fails every queued
    /// command, and wakes whoever waits for the end. Called by the task as it ends.
    pub(crate) fn end(&self, error: &ClientError) {
        let mut control = lock(&self.control);
        if control.ended.is_none() {
            control.ended = Some(error.clone());
        }
        let commands = std::mem::take(&mut control.commands);
        drop(control);
        for command in commands {
            command.fail(error);
        }
        self.ended.notify_waiters();
    }

    /// Why the connection ended, or `None` while it is open.
    pub(crate) fn ended(&self) -> Option<ClientError> {
        lock(&self.control).ended.clone()
    }

    /// Waits until the connection has ended, and says why.
    pub(crate) async fn wait_ended(&self) -> ClientError {
        loop {
            let notified = self.ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(error) = self.ended() {
                return error;
            }
            notified.await;
        }
    }
}
