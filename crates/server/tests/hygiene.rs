//! Connection hygiene (under a watchdog): the idle limit, the connection cap, heartbeats.

mod common;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};

use common::*;

const IDLE: Duration = ms(600);

/// A server with an idle limit of [`IDLE`], asking for heartbeats every third of it.
fn idle_server() -> Server {
    priority_server_with(|l| (l.heartbeat, l.idle_timeout) = (IDLE / 3, IDLE))
}

/// When each heartbeat came (since `start`), and the fatal error's code if one came.
type Heard = (Vec<Duration>, Option<ErrorCode>);

/// Reads frames until the connection ends, up to 5 s after `start`.
fn heartbeats_until_closed(c: &mut TcpStream, start: Instant) -> Heard {
    let limit = Duration::from_secs(5);
    c.set_read_timeout(Some(ms(50))).unwrap();
    let mut buf = vec![0; 4096];
    let (mut filled, mut beats, mut code) = (0, Vec::new(), None);
    loop {
        assert!(start.elapsed() < limit, "still open after {limit:?}");
        match c.read(&mut buf[filled..]) {
            Ok(0) => return (beats, code),
            Ok(n) => filled += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            // A reset after the error frame is an end too.
            Err(_) => return (beats, code),
        }
        let mut at = 0;
        while let Some((frame, len)) = decode(&buf[at..filled]).expect("the server's frames decode")
        {
            match frame {
                Frame::Heartbeat => beats.push(start.elapsed()),
                Frame::Error(error) => code = Some(error.code),
                other => panic!("expected heartbeats, got {other:?}"),
            }
            at += len;
        }
        buf.copy_within(at..filled, 0);
        filled -= at;
    }
}

/// When it began, and the socket of a connection that said `Hello` announcing `heartbeat_ms`.
fn raw_hello(addr: SocketAddr, heartbeat_ms: u32) -> (Instant, TcpStream) {
    let start = Instant::now();
    let mut c = Client::connect(addr);
    c.shake_hands(heartbeat_ms);
    (start, c.into_stream())
}

/// Connects (a `Hello` announcing `hello` ms, if any) until closed with `code`: beats, and when.
fn closed(server: &Server, hello: Option<u32>, code: ErrorCode) -> (Vec<Duration>, Duration) {
    let addr = server.local_addr();
    let (start, mut c) = match hello {
        Some(heartbeat_ms) => raw_hello(addr, heartbeat_ms),
        None => (Instant::now(), TcpStream::connect(addr).unwrap()),
    };
    let (beats, got) = heartbeats_until_closed(&mut c, start);
    assert_eq!(got, Some(code));
    (beats, start.elapsed())
}

#[test]
fn a_connection_silent_after_hello_with_heartbeat_zero_is_closed_at_the_idle_limit() {
    watched("idle after Hello", || {
        let server = idle_server();
        let (beats, elapsed) = closed(&server, Some(0), ErrorCode::HEARTBEAT_TIMEOUT);
        assert!(beats.is_empty(), "heartbeats, none asked: {beats:?}");
        assert!(elapsed >= IDLE, "closed after {elapsed:?}, too soon");
        assert!(elapsed < IDLE * 3, "closed after {elapsed:?}");
        connections_become(&server, 0);
    });
}

#[test]
fn a_connection_that_announced_a_long_heartbeat_is_closed_at_the_idle_limit_all_the_same() {
    watched("idle, long heartbeat", || {
        let server = idle_server();
        // An hour: the client owes its own heartbeats at the server's interval, and sends none.
        let (_, elapsed) = closed(&server, Some(3_600_000), ErrorCode::HEARTBEAT_TIMEOUT);
        assert!(elapsed >= IDLE);
    });
}

#[test]
fn a_connection_that_never_says_hello_is_closed_at_the_idle_limit() {
    watched("idle before Hello", || {
        let server = idle_server();
        let (_, elapsed) = closed(&server, None, ErrorCode::HANDSHAKE_REQUIRED);
        let in_time = elapsed >= IDLE && elapsed < IDLE * 3;
        assert!(in_time, "closed after {elapsed:?}");
    });
}

#[test]
fn a_client_that_follows_the_servers_heartbeat_stays_open_past_the_idle_limit() {
    watched("heartbeats keep it open", || {
        let server = idle_server();
        let mut c = Client::connect(server.local_addr());
        let welcome = c.shake_hands(0);
        assert_eq!(welcome.heartbeat_ms, 200);
        let until = Instant::now() + IDLE * 4;
        while Instant::now() < until {
            std::thread::sleep(ms(u64::from(welcome.heartbeat_ms)));
            c.send(Frame::Heartbeat);
        }
        c.open_producer(1, 0, 16);
    });
}

#[test]
fn a_client_announcing_300_ms_receives_heartbeats_at_that_rate() {
    watched("heartbeats at 300 ms", || {
        // The server's own interval (what it asks of clients) is another: 5 s.
        let server = priority_server();
        let (start, mut c) = raw_hello(server.local_addr(), 300);
        // The client sends its own heartbeats meanwhile, on another handle of the socket.
        let mut beat = c.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let frame = encoded(Frame::Heartbeat);
            let until = Instant::now() + ms(1700);
            while Instant::now() < until {
                std::thread::sleep(ms(100));
                let _ = std::io::Write::write_all(&mut beat, &frame);
            }
            let _ = beat.shutdown(std::net::Shutdown::Write);
        });
        let (beats, _) = heartbeats_until_closed(&mut c, start);
        sender.join().unwrap();
        let first_1600: Vec<_> = beats.iter().filter(|&&at| at <= ms(1600)).collect();
        let n = first_1600.len();
        assert!((4..=6).contains(&n), "in 1.6 s at 300 ms: {beats:?}");
        for pair in first_1600.windows(2) {
            let gap = *pair[1] - *pair[0];
            assert!(gap >= ms(250) && gap <= ms(600), "heartbeats {beats:?}");
        }
    });
}

#[test]
fn a_client_announcing_zero_receives_no_heartbeat_whatever_the_servers_interval() {
    watched("no heartbeats", || {
        let server = priority_server_with(|l| (l.heartbeat, l.idle_timeout) = (ms(100), ms(1500)));
        // Timed out by the server's idle limit only.
        let (beats, elapsed) = closed(&server, Some(0), ErrorCode::HEARTBEAT_TIMEOUT);
        assert!(beats.is_empty(), "heartbeats, 0 announced: {beats:?}");
        assert!(elapsed >= ms(1500));
    });
}

#[test]
fn a_connection_past_the_cap_is_refused_with_its_own_code_and_a_freed_place_is_taken_again() {
    watched("connection cap", || {
        let server = priority_server_with(|l| l.max_connections = 2);
        let addr = server.local_addr();
        let a = Client::hello(addr);
        let _b = Client::hello(addr);
        // Many more at once: each is refused, and none takes a place.
        for _ in 0..20 {
            let mut refused = Client::connect(addr);
            refused.expect_fatal(ErrorCode::TOO_MANY_CONNECTIONS);
        }
        assert!(ErrorCode::TOO_MANY_CONNECTIONS.is_fatal());
        assert_ne!(ErrorCode::TOO_MANY_CONNECTIONS, ErrorCode::INTERNAL);
        // Refusals are counted as such, not as INTERNAL closes.
        let stats = server.stats();
        assert_eq!(stats.refused_connections, 20);
        assert_eq!((stats.internal_closes, stats.outbound_overflows), (0, 0));
        drop(a);
        connections_become(&server, 1);
        Client::producer(addr, 1, 0, 16);
    });
}

#[test]
fn a_client_announcing_1_ms_gets_heartbeats_no_faster_than_every_10_ms() {
    watched("heartbeat floor", || {
        let server = priority_server();
        let (start, mut c) = raw_hello(server.local_addr(), 1);
        let writer = c.try_clone().unwrap();
        let closer = std::thread::spawn(move || {
            std::thread::sleep(ms(500));
            let _ = writer.shutdown(std::net::Shutdown::Write);
        });
        let (beats, _) = heartbeats_until_closed(&mut c, start);
        closer.join().unwrap();
        // At 1 ms it would be about 500; at the floor of 10 ms about 50.
        let n = beats.len();
        assert!((20..=60).contains(&n), "{n} heartbeats in 0.5 s");
    });
}
