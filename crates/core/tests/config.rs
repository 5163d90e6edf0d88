//! Configuration: invalid settings are errors with messages; pinning; named threads.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn invalid_configurations_are_errors_with_messages() {
    let msg = |c| queue_pool::<u64>(c).build().unwrap_err().to_string();
    let none = "queue pool: 0 processors; a pool needs at least 1 (omit the pool to have none)";
    assert_eq!(msg(PoolConfig::new(0)), none);
    let one = || PoolConfig::new(1);
    for (config, says) in [
        (one().capacity(0).watermarks(0, 0), "capacity 0"),
        (
            one().watermarks(8, 8),
            "low watermark 8 must be below the high watermark 8",
        ),
        (
            one().capacity(16).watermarks(1, 17),
            "above the queue capacity 16",
        ),
        (one().max_batch(0), "max_batch 0"),
        (one().pin_to([1024]), "core id 1024 is out of range"),
        (one().pin_to([usize::MAX]), "out of range"),
        (
            one().pin_to([1000]),
            "core id 1000 is not one this process may run on",
        ),
    ] {
        let msg = msg(config);
        assert!(msg.contains(says), "{msg}");
    }
    let no_pools = Dispatcher::<u64>::builder().build().unwrap_err();
    assert_eq!(no_pools.problem, Problem::NoPools);
    let queue = || queue_pool::<u64>(one());
    let zero = queue().stuck_warning(Duration::ZERO).build().unwrap_err();
    let says = "stuck_warning must be greater than zero";
    assert!(zero.to_string().contains(says), "{zero}");
    let twice = [ClientType::Queue, ClientType::Queue, ClientType::Cluster];
    let order = queue().shutdown_order(twice).build();
    let order = order.unwrap_err().to_string();
    assert!(order.contains("must name session, queue and cluster once each"));
}

#[test]
fn pinning_to_a_usable_core_is_reported_in_stats() {
    let cores = core_affinity_ids();
    let (d, h, _log) = recorded(PoolConfig::new(1).pin_to([cores[0]]));
    d.synchronize(h).unwrap();
    let pinning = d.stats()[0].pinning;
    let reported = matches!(pinning, Pinning::Pinned(c) | Pinning::Refused(c) if c == cores[0]);
    assert!(reported, "{pinning:?}");
    let unpinned = one_queue(PoolConfig::new(1));
    unpinned.synchronize(first_queue(&unpinned)).unwrap();
    assert_eq!(unpinned.stats()[0].pinning, Pinning::NotRequested);
}

/// The usable cores, exactly those a pool may be pinned to: probed by building.
fn core_affinity_ids() -> Vec<usize> {
    let pinned = |c| PoolConfig::new(1).pin_to([c]);
    let usable = |&c: &usize| queue_pool::<u64>(pinned(c)).build().is_ok();
    (0..MAX_CORE_ID).filter(usable).take(1).collect()
}

#[test]
fn processors_are_named_threads_per_client_type() {
    let builder = Dispatcher::<u64>::builder().pool(ClientType::Session, PoolConfig::new(2));
    let d = builder.pool(ClientType::Cluster, PoolConfig::new(1));
    let d = d.build().unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let sessions = d.processors(ClientType::Session).into_iter();
    for p in sessions.chain(d.processors(ClientType::Cluster)) {
        let names = names.clone();
        let name = move || thread::current().name().unwrap().to_owned();
        let push = move || names.lock().unwrap().push(name());
        d.execute(p, push).unwrap();
        d.synchronize(p).unwrap();
    }
    let names = names.lock().unwrap().clone();
    assert_eq!(names, ["zd-session-0", "zd-session-1", "zd-cluster-0"]);
    assert!(d.processors(ClientType::Queue).is_empty());
}

/// An impossible stack size is an error from `build`, not a panic; a reasonable one runs.
#[test]
fn a_stack_size_the_system_cannot_provide_is_an_error() {
    let queues = |n| queue_pool::<u64>(PoolConfig::new(n));
    let err = queues(2).stack_size(1 << 50).build().unwrap_err();
    assert_eq!(err.client_type, Some(ClientType::Queue));
    let problem = &err.problem;
    let cannot = matches!(problem, Problem::CannotSpawn { thread, .. } if thread == "zd-queue-0");
    assert!(cannot, "{err:?}");
    let says = "queue pool: cannot start thread zd-queue-0: ";
    assert!(err.to_string().starts_with(says), "{err}");

    let d = queues(1).stack_size(256 << 10).build().unwrap();
    let (h, log) = recorder_on(&d);
    d.dispatch(h, Event::Message(7)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(log.lock().unwrap()[0], Seen::Message(7));
}
