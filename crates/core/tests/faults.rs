//! Faults: a panicking handler, flush or callback is contained; a stuck one is reported.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn a_panicking_handler_flush_or_callback_is_counted_and_the_processor_goes_on() {
    struct PanickyFlush;
    impl Client<u64> for PanickyFlush {
        fn flush(&mut self, _c: &mut Context<u64>) {
            panic!("flush fails");
        }
    }
    let d = one_queue(PoolConfig::new(1));
    let (h, log) = panicking_recorder_on(&d, 2);
    let f = on_queue(&d, PanickyFlush);
    dispatch_all(&d, h, 0..4);
    let fails = Callback::new(|| panic!("callback fails"));
    d.dispatch(h, Event::Callback(fails)).unwrap();
    d.dispatch(f, Event::Message(0)).unwrap();
    let fails = Callback::new(|| panic!("dispatcher callback fails"));
    d.execute(h.processor(), fails).unwrap();
    d.dispatch(h, Event::Message(5)).unwrap();
    assert_eq!(handled(&d, h, &log), [0, 1, 2, 3, 5]);
    assert_eq!(d.stats()[0].panics, 4);
}

/// One queue processor warned of after 50 ms stuck, monitored every 5 ms; its id.
fn watched() -> (Dispatcher<u64>, ProcessorId) {
    let builder = queue_pool::<u64>(PoolConfig::new(1)).stuck_warning(Duration::from_millis(50));
    let d = builder.monitor_interval(Duration::from_millis(5));
    let d = d.build().unwrap();
    let p = first_queue(&d);
    (d, p)
}

/// Stalls `p` for `ms` and waits up to 5 s for its report: there is exactly one.
fn reported_once_stuck_for(d: &Dispatcher<u64>, p: ProcessorId, ms: u64) {
    let stuck = Callback::new(move || thread::sleep(Duration::from_millis(ms)));
    d.execute(p, stuck).unwrap();
    let (limit, step) = (Duration::from_secs(5), Duration::from_millis(10));
    wait_until(limit, step, || d.stats()[0].stuck_reports > 0);
    assert_eq!(d.stats()[0].stuck_reports, 1);
}

#[test]
fn a_stuck_processor_is_reported() {
    let (d, p) = watched();
    reported_once_stuck_for(&d, p, 300);
    d.synchronize(p).unwrap();
    assert_eq!(d.stats()[0].stuck_reports, 1, "one report per episode");
}

#[test]
fn a_processor_stuck_in_its_first_event_after_idleness_is_reported_from_the_monitors_next_tick() {
    let (d, p) = watched();
    // Long enough for the resting monitor's interval to reach its longest, 1 s.
    thread::sleep(Duration::from_secs(3));
    // Its next tick (at most 1 s away) finds the processor awake, then 50 ms more.
    reported_once_stuck_for(&d, p, 1500);
}
