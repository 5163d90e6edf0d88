//! Waiting for a processor from an application thread: `synchronize`.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use zerodispatch_core::*;

#[test]
fn synchronize_waits_for_earlier_events_and_refuses_its_own_thread() {
    let d = one_queue(PoolConfig::new(1));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    for i in 0..1000 {
        d.dispatch(h, Event::Message(i)).unwrap();
    }
    d.synchronize(h).unwrap();
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|s| matches!(s, Seen::Message(_)))
            .count(),
        1000
    );
    let result = Arc::new(Mutex::new(None));
    let (handle, r) = (d.handle(), result.clone());
    d.execute(
        h.processor(),
        Callback::new(move || *r.lock().unwrap() = Some(handle.synchronize(h))),
    )
    .unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(
        *result.lock().unwrap(),
        Some(Err(SyncError::OnProcessorThread(h.processor())))
    );
}
