//! An idle monitor wakes about once a second, however often its processors wake (counts switches).

#![cfg(not(loom))]

mod common;

use common::*;

/// The tests of this binary one at a time: each counts every monitor of the process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Context switches of this process's threads named `name` (`/proc/self/task/*/status`).
#[cfg(target_os = "linux")]
fn context_switches_of(name: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("voluntary_ctxt_switches")) // and nonvoluntary_…
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// A dispatcher of `queues` and `sessions` processors, its monitor probing every 10 ms.
fn monitored(queues: usize, sessions: Option<usize>) -> Dispatcher<u64> {
    let builder = queue_pool(PoolConfig::new(queues));
    let builder = match sessions {
        Some(n) => builder.pool(ClientType::Session, PoolConfig::new(n)),
        None => builder,
    };
    let builder = builder.monitor_interval(Duration::from_millis(10));
    builder.build().unwrap()
}

#[test]
#[cfg(target_os = "linux")]
fn an_idle_dispatchers_monitor_wakes_about_once_a_second_not_at_its_interval() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let d = monitored(2, Some(1));
    // Long enough for the processors to park and the monitor's interval to grow to 1 s.
    thread::sleep(Duration::from_secs(3));
    let before = context_switches_of("zd-monitor");
    thread::sleep(Duration::from_secs(2));
    let woke = context_switches_of("zd-monitor") - before;
    // At 10 ms it would be about 200; at 1 s, 2 (load adds a few involuntary ones).
    assert!(woke <= 20, "the idle monitor woke {woke} times in 2 s");
    // And it still watches: a processor that wakes is probed again.
    let (queue, _seen) = recorder_on(&d);
    d.synchronize(queue).unwrap();
}

#[test]
#[cfg(target_os = "linux")]
fn a_processor_woken_for_one_event_at_a_time_wakes_no_monitor() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let d = monitored(1, None);
    let (queue, log) = recorder_on(&d);
    // Long enough for the monitor to rest.
    thread::sleep(Duration::from_secs(2));
    let before = context_switches_of("zd-monitor");
    // A broker at 50 msg/s: the processor parks between events.
    for m in 0..50 {
        d.dispatch(queue, Event::Message(m)).unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    let woke = context_switches_of("zd-monitor") - before;
    assert_eq!(handled(&d, queue, &log).len(), 50);
    // Woken at each wake of the processor: 100. Resting: a few ticks a second, 10 ms a while.
    let why = format!("the monitor woke {woke} times for 50 events in 1 s");
    assert!(woke <= 40, "{why}");
}
