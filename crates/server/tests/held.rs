//! A server no client can hold (each test under a watchdog): frame timeout, names, places.

mod common;

use std::io::Write;
use std::thread::JoinHandle;

use common::*;

/// Writes `bytes` one at a time, `every` apart, on a thread: a client reading it, and the thread.
fn trickle(c: Client, bytes: Vec<u8>, every: Duration) -> (Client, JoinHandle<()>) {
    let mut writer = c.into_stream();
    let reader = Client::from_stream(writer.try_clone().unwrap());
    let trickle = std::thread::spawn(move || {
        for byte in bytes {
            if writer.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    });
    (reader, trickle)
}

#[test]
fn a_client_trickling_a_frame_within_the_idle_limit_is_closed_at_the_frame_timeout() {
    watched("trickle", || {
        let frame_timeout = ms(500);
        let server = priority_server_with(|l| {
            (l.max_connections, l.heartbeat) = (1, Duration::ZERO);
            (l.idle_timeout, l.frame_timeout) = (ms(400), frame_timeout);
        });
        let addr = server.local_addr();
        let mut c = Client::connect(addr);
        let told = c.shake_hands(0);
        assert_eq!(told.limits.frame_timeout_ms, 500);
        // A publish of 1,000 bytes, one byte every 150 ms: never idle for 400 ms.
        let frame = body(0x12, &[1; 1000]);
        let started = Instant::now();
        let (mut reader, trickle) = trickle(c, frame, ms(150));
        reader.expect_fatal(ErrorCode::FRAME_TIMEOUT);
        let closed = started.elapsed();
        assert!(closed >= frame_timeout, "closed after {closed:?}");
        assert!(closed < 2 * frame_timeout, "closed after {closed:?}");
        // Its place is another client's now.
        Client::connect(addr).shake_hands(0);
        trickle.join().unwrap();
    });
}

#[test]
fn a_client_trickling_its_hello_is_closed_at_the_handshake_timeout() {
    watched("trickled hello", || {
        let server = priority_server_with(|l| {
            (l.heartbeat, l.idle_timeout) = (Duration::ZERO, Duration::from_secs(2));
            l.handshake_timeout = ms(400);
        });
        let hello = encoded(hello_frame(0));
        let c = Client::connect(server.local_addr());
        let started = Instant::now();
        let (mut reader, trickle) = trickle(c, hello, ms(100));
        reader.expect_fatal(ErrorCode::HANDSHAKE_REQUIRED);
        assert!(started.elapsed() < ms(800));
        trickle.join().unwrap();
    });
}

#[test]
fn one_connection_creates_at_most_max_new_names_and_known_names_still_open() {
    watched("new names", || {
        let server = priority_server_with(|l| l.max_new_names = 4);
        let addr = server.local_addr();
        let mut c = Client::connect(addr);
        assert_eq!(c.shake_hands(0).limits.max_new_names, 4);
        for n in 0..4 {
            let name = format!("name-{n}");
            assert_eq!(c.open_named_producer(n, 0, 16, &name), Ok(None), "{name}");
            c.close_producer_echoed(n);
        }
        let fifth = c.open_named_producer(9, 0, 16, "one-too-many");
        assert_eq!(fifth, Err(ErrorCode::LIMIT_OUT_OF_RANGE), "a fifth name");
        // Known names open as ever, on this connection and another.
        assert_eq!(c.open_named_producer(10, 0, 16, "name-0"), Ok(None));
        let mut other = Client::hello(addr);
        assert_eq!(other.open_named_producer(1, 0, 16, "name-1"), Ok(None));
        assert_eq!(other.open_named_producer(2, 0, 16, "theirs"), Ok(None));
        // Anonymous producers are not names.
        c.open_producer(11, 0, 16);
    });
}

#[test]
fn connections_one_after_another_cannot_fill_the_table_of_names_and_an_open_name_is_kept() {
    watched("names reclaimed", || {
        let mut limits = limits();
        limits.max_new_names = 2;
        let broker = BrokerConfig {
            max_producer_names: 4,
            ..BrokerConfig::default()
        };
        let server = server_of(&[QueueMode::Priority], limits, broker);
        let addr = server.local_addr();
        // A name held open, with a message stored, by a client that stays.
        let mut holder = Client::hello(addr);
        assert_eq!(holder.open_named_producer(1, 0, 16, "held"), Ok(None));
        holder.publish(1, [7], |_, _| 1);
        holder.all_stored(1, 1);
        // Twenty connections in a row, each creating two names: 40 through a table of 4.
        for n in 0..20 {
            let mut c = Client::hello(addr);
            for p in 0..2 {
                let name = format!("churn-{n}-{p}");
                // The last connection's names close a moment after it left: until then the
                // table may be full; a name never given back fails at the deadline.
                let deadline = Instant::now() + Duration::from_secs(5);
                let opened = loop {
                    match c.open_named_producer(p, 0, 16, &name) {
                        Err(ErrorCode::LIMIT_OUT_OF_RANGE) if Instant::now() < deadline => {
                            std::thread::sleep(ms(5));
                        }
                        opened => break opened,
                    }
                };
                assert_eq!(opened, Ok(None), "{name}");
            }
            if n % 2 == 0 {
                c.close_producer_echoed(0);
                c.close_producer_echoed(1);
            }
            // Odd connections just leave: the server closes their producers.
        }
        // The held name kept its place and its record.
        let mut again = Client::hello(addr);
        let open = again.open_named_producer(1, 0, 16, "held");
        assert_eq!(open, Err(ErrorCode::NAME_IN_USE));
        holder.close_producer_echoed(1);
        assert_eq!(again.open_named_producer(1, 0, 16, "held"), Ok(Some(7)));
    });
}

#[test]
fn a_connection_the_server_closed_frees_its_place_before_the_client_sees_the_end() {
    watched("place freed", || {
        let server = priority_server_with(|l| {
            (l.max_connections, l.heartbeat) = (1, Duration::ZERO);
            l.idle_timeout = ms(300);
        });
        let addr = server.local_addr();
        for _ in 0..3 {
            // A careless client: silent, closed as idle, and keeps its socket open.
            let mut careless = Client::hello(addr);
            careless.expect_fatal(ErrorCode::HEARTBEAT_TIMEOUT);
            Client::connect(addr).shake_hands(0);
            connections_become(&server, 0);
            drop(careless);
        }
    });
}
