//! Configuration and processors: invalid settings are errors with messages, pinning is
//! reported, processors are named threads.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::*;
use zerodispatch_core::*;

#[test]
fn invalid_configurations_are_errors_with_messages() {
    let build = |c: PoolConfig| {
        Dispatcher::<u64>::builder()
            .pool(ClientType::Queue, c)
            .build()
            .map(drop)
    };
    let msg = |r: Result<(), ConfigError>| r.unwrap_err().to_string();
    assert_eq!(
        msg(build(PoolConfig::new(0))),
        "queue pool: 0 processors; a pool needs at least 1 (omit the pool to have none)"
    );
    assert!(msg(build(PoolConfig::new(1).capacity(0).watermarks(0, 0))).contains("capacity 0"));
    assert!(
        msg(build(PoolConfig::new(1).watermarks(8, 8)))
            .contains("low watermark 8 must be below the high watermark 8")
    );
    assert!(
        msg(build(PoolConfig::new(1).capacity(16).watermarks(1, 17)))
            .contains("above the queue capacity 16")
    );
    assert!(msg(build(PoolConfig::new(1).max_batch(0))).contains("max_batch 0"));
    assert!(msg(build(PoolConfig::new(1).pin_to([1024]))).contains("core id 1024 is out of range"));
    assert!(msg(build(PoolConfig::new(1).pin_to([usize::MAX]))).contains("out of range"));
    assert!(
        msg(build(PoolConfig::new(1).pin_to([1000])))
            .contains("core id 1000 is not one this process may run on")
    );
    assert_eq!(
        Dispatcher::<u64>::builder().build().unwrap_err().problem,
        Problem::NoPools
    );
    let zero = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .stuck_warning(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(
        zero.to_string()
            .contains("stuck_warning must be greater than zero")
    );
    let order = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .shutdown_order([ClientType::Queue, ClientType::Queue, ClientType::Cluster])
        .build()
        .unwrap_err();
    assert!(
        order
            .to_string()
            .contains("must name session, queue and cluster once each")
    );
}

#[test]
fn pinning_to_a_usable_core_is_reported_in_stats() {
    let cores: Vec<usize> = core_affinity_ids();
    let d = one_queue(PoolConfig::new(1).pin_to([cores[0]]));
    let (h, _log) = recorder_on(&d);
    d.synchronize(h).unwrap();
    let pinning = d.stats()[0].pinning;
    assert!(
        matches!(pinning, Pinning::Pinned(c) | Pinning::Refused(c) if c == cores[0]),
        "{pinning:?}"
    );
    let unpinned = one_queue(PoolConfig::new(1));
    unpinned
        .synchronize(unpinned.processors(ClientType::Queue)[0])
        .unwrap();
    assert_eq!(unpinned.stats()[0].pinning, Pinning::NotRequested);
}

fn core_affinity_ids() -> Vec<usize> {
    // The usable cores are exactly those a pool may be pinned to: probe by building.
    (0..MAX_CORE_ID)
        .filter(|&c| {
            Dispatcher::<u64>::builder()
                .pool(ClientType::Queue, PoolConfig::new(1).pin_to([c]))
                .build()
                .is_ok()
        })
        .take(1)
        .collect()
}

#[test]
fn processors_are_named_threads_per_client_type() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Session, PoolConfig::new(2))
        .pool(ClientType::Cluster, PoolConfig::new(1))
        .build()
        .unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    for p in d
        .processors(ClientType::Session)
        .into_iter()
        .chain(d.processors(ClientType::Cluster))
    {
        let names = names.clone();
        d.execute(
            p,
            Callback::new(move || {
                names
                    .lock()
                    .unwrap()
                    .push(thread::current().name().unwrap().to_owned())
            }),
        )
        .unwrap();
        d.synchronize(p).unwrap();
    }
    assert_eq!(
        *names.lock().unwrap(),
        ["zd-session-0", "zd-session-1", "zd-cluster-0"]
    );
    assert!(d.processors(ClientType::Queue).is_empty());
}

/// A stack size the system cannot provide is an error from `build`, not a panic; a
/// reasonable one runs the dispatcher as usual.
#[test]
fn a_stack_size_the_system_cannot_provide_is_an_error() {
    let err = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(2))
        .stack_size(1 << 50)
        .build()
        .unwrap_err();
    assert_eq!(err.client_type, Some(ClientType::Queue));
    assert!(
        matches!(&err.problem, Problem::CannotSpawn { thread, .. } if thread == "zd-queue-0"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("queue pool: cannot start thread zd-queue-0: "),
        "{err}"
    );

    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .stack_size(256 << 10)
        .build()
        .unwrap();
    let (h, log) = recorder_on(&d);
    d.dispatch(h, Event::Message(7)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(log.lock().unwrap()[0], Seen::Message(7));
}
