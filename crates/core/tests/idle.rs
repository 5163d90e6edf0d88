//! An idle dispatcher's monitor wakes about once a second (own binary: it counts switches).

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_core::*;

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

#[test]
#[cfg(target_os = "linux")]
fn an_idle_dispatchers_monitor_wakes_about_once_a_second_not_at_its_interval() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(2))
        .pool(ClientType::Session, PoolConfig::new(1))
        .monitor_interval(Duration::from_millis(10))
        .build()
        .unwrap();
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
