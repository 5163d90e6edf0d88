//! `zd-server` on SIGTERM and SIGINT: confirms what it read, says `SHUTTING_DOWN`, exits 0 soon.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};

use common::*;

const WATCHDOG: Duration = Duration::from_secs(60);

/// Starts `zd-server` on a free loopback port with `args`; it and the address it prints.
fn spawn_server(args: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zd-server"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("zd-server starts");
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .split_whitespace()
        .find_map(|word| word.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, addr)
}

/// Sends `signal` (`-TERM`, `-INT`) to the process.
fn kill(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status();
    assert!(status.unwrap().success());
}

/// Waits for the process to exit, up to `limit`.
fn exit_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("zd-server still running {limit:?} after the signal");
        }
        std::thread::sleep(ms(20));
    }
}

/// Publishes, signals with `signal`, and checks the drain and the exit.
fn drains_and_exits_zero(signal: &str) {
    let (mut child, addr) = spawn_server(&["--slots", "4096"]);
    let (mut producer, mut consumer) = open_pair(addr, 1024, 0);
    producer.publish(1, 0..100, payload_of);
    producer.all_stored(1, 100);
    // Published, not read back: the server owes these their confirms.
    producer.publish(1, 100..1100, payload_of);
    std::thread::sleep(ms(200));
    kill(&child, signal);
    producer.all_stored(1, 1000);
    producer.expect_fatal(ErrorCode::SHUTTING_DOWN);
    consumer.expect_fatal(ErrorCode::SHUTTING_DOWN);
    let status = exit_within(&mut child, Duration::from_secs(10));
    assert!(status.success(), "zd-server exited with {status:?}");
    let connected = TcpStream::connect(addr);
    assert!(connected.is_err(), "zd-server still accepts after exiting");
}

#[test]
fn sigterm_drains_tells_every_connection_shutting_down_and_exits_zero() {
    within(WATCHDOG, "SIGTERM", || drains_and_exits_zero("-TERM"));
}

#[test]
fn sigint_drains_tells_every_connection_shutting_down_and_exits_zero() {
    within(WATCHDOG, "SIGINT", || drains_and_exits_zero("-INT"));
}

/// A client that does not read is abandoned 2.5 s after the signal; the exit follows soon.
#[test]
fn sigterm_with_a_client_that_does_not_read_exits_soon_after_the_drain_bound() {
    within(WATCHDOG, "SIGTERM, a client not reading", || {
        let (mut child, addr) = spawn_server(&["--fanout", "16"]);
        // 16 fanout consumers with windows of 4 KiB payloads: 64 MiB owed, none read.
        let mut c = Client::hello(addr);
        for app in 0..16 {
            c.open_consumer(u32::from(app), 0, app, 1024);
        }
        c.open_producer(100, 0, 1024);
        let payload = [7_u8; 4000];
        for round in 0..8_u64 {
            let ids = round * 128..(round + 1) * 128;
            c.send_raw(&built(|out| {
                publish(out, 100, ids.map(|id| (id, &payload[..])))
            }));
        }
        std::thread::sleep(ms(500));
        let signalled = Instant::now();
        kill(&child, "-TERM");
        let status = exit_within(&mut child, Duration::from_secs(10));
        let exited = signalled.elapsed();
        eprintln!("zd-server exited {exited:?} after SIGTERM, a client not reading");
        assert!(status.success(), "zd-server exited with {status:?}");
        assert!(exited < ms(4000), "exited {exited:?} after; bound 2.5 s");
        drop(c);
    });
}
