//! Test clients shared by the core's integration tests.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::sync::Mutex;

use zerodispatch_core::{Client, ClientEvent, Context};

/// What a [`Recorder`] saw, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A message.
    Message(u64),
    /// A callback (run by the client).
    Callback,
    /// A flush.
    Flush,
}

/// A client that runs callbacks and records every event and flush.
pub struct Recorder {
    pub log: Arc<Mutex<Vec<Seen>>>,
    /// Panic on the message with this value.
    pub panic_on: Option<u64>,
}

impl Recorder {
    pub fn new() -> (Self, Arc<Mutex<Vec<Seen>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        (
            Self {
                log: log.clone(),
                panic_on: None,
            },
            log,
        )
    }
}

impl Client<u64> for Recorder {
    fn on_event(&mut self, event: ClientEvent<u64>, _ctx: &mut Context<u64>) {
        match event {
            ClientEvent::Message(m) => {
                self.log.lock().unwrap().push(Seen::Message(m));
                if self.panic_on == Some(m) {
                    panic!("test client panics on message {m}");
                }
            }
            ClientEvent::Callback(cb) => {
                self.log.lock().unwrap().push(Seen::Callback);
                cb.call();
            }
        }
    }

    fn flush(&mut self, _ctx: &mut Context<u64>) {
        self.log.lock().unwrap().push(Seen::Flush);
    }
}
