//! The machine's floor under a confirm over TCP at low rates, with no broker in it: the
//! path `perftest --transport tcp --rate 50` times, built from nothing but tokio, a
//! loopback socket and parked threads.
//!
//! An application thread hands a 16-byte frame to a client runtime's task (one worker, as
//! the perftest's clients), which writes it to a loopback socket; a server runtime (one
//! worker, as the perftest's server) reads it and passes it along a chain of `hops` parked
//! threads (the broker's processors: a confirm crosses the session processor, the queue
//! processor and the session processor again, so 3 by default), the last of which hands
//! it back to the server's writer task; the client's reader task reads the echo and
//! stamps the lap, as the perftest's confirm callback does on its client's I/O thread.
//! One lap every 20 ms, 500 laps (the shape of `perftest --rate 50 --duration 10s`).
//! Every thread on the way is parked when the frame reaches it, as at that rate in the
//! broker; the percentiles printed are what that many wake-ups and two loopback
//! deliveries cost on this machine before any work is done.
//!
//! Run: `cargo run --release --example tcp_ring [hops] [laps] [direct] [app]` (defaults 3 and
//! 500; `0` hops: the server's task echoes the frame itself). With `direct`, the last hop
//! writes the frame to the socket itself instead of handing it to the server's writer
//! task: the path with one wake-up fewer, as if the session processor wrote its ACKs. With
//! `app`, the application thread writes its frame to the socket itself instead of handing
//! it to the client runtime's writer task: the other wake-up fewer, as if the publishing
//! thread wrote its PUTs (flags in any order: `tcp_ring 1 500 direct app`).

use std::io::Write;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::mpsc as tokio_mpsc;

/// One frame: the lap's number and its start, in nanoseconds since the run began.
type Frame = [u8; 16];

fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Where the last hop of the chain puts a frame.
#[derive(Clone)]
enum Out {
    /// To the server's writer task.
    Task(tokio_mpsc::UnboundedSender<Frame>),
    /// Straight to the socket (a duplicate of the server's socket; nonblocking, as tokio
    /// set it, and 16-byte frames at 50 a second never find its buffer full).
    Socket(Arc<std::net::TcpStream>),
}

impl Out {
    fn send(&self, frame: Frame) -> bool {
        match self {
            Out::Task(writer) => writer.send(frame).is_ok(),
            Out::Socket(socket) => (&**socket).write_all(&frame).is_ok(),
        }
    }
}

/// The chain of parked threads between the server's reader and its writer; returns the
/// sender into its first thread.
fn chain(hops: usize, out: Out) -> Option<mpsc::Sender<Frame>> {
    if hops == 0 {
        return None;
    }
    let (first, mut from) = mpsc::channel::<Frame>();
    for hop in 1..=hops {
        let (to, next) = mpsc::channel::<Frame>();
        let (last, out) = (hop == hops, out.clone());
        thread::Builder::new()
            .name(format!("hop-{hop}"))
            .spawn(move || {
                while let Ok(frame) = from.recv() {
                    let sent = if last {
                        out.send(frame)
                    } else {
                        to.send(frame).is_ok()
                    };
                    if !sent {
                        return;
                    }
                }
            })
            .expect("spawn a hop");
        from = next;
    }
    Some(first)
}

/// The server: reads frames, passes each along the chain (or echoes it), writes what
/// comes back.
async fn serve(listener: TcpListener, hops: usize, direct: bool) {
    let (stream, _) = listener.accept().await.expect("accept");
    stream.set_nodelay(true).expect("nodelay");
    // With `direct`, a duplicate of the socket for the last hop to write to.
    let (stream, duplicate) = if direct {
        let std = stream.into_std().expect("the socket, as std's");
        let duplicate = std.try_clone().expect("a duplicate of the socket");
        (
            TcpStream::from_std(std).expect("back to tokio"),
            Some(duplicate),
        )
    } else {
        (stream, None)
    };
    let (mut read, mut write) = stream.into_split();
    let (back, mut to_write) = tokio_mpsc::unbounded_channel::<Frame>();
    let out = match duplicate {
        Some(socket) => Out::Socket(Arc::new(socket)),
        None => Out::Task(back.clone()),
    };
    let into_chain = chain(hops, out);
    tokio::spawn(async move {
        while let Some(frame) = to_write.recv().await {
            if write.write_all(&frame).await.is_err() {
                return;
            }
        }
    });
    let mut frame = [0; 16];
    while read.read_exact(&mut frame).await.is_ok() {
        let passed = match &into_chain {
            Some(chain) => chain.send(frame).is_ok(),
            None => back.send(frame).is_ok(),
        };
        if !passed {
            return;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let hops: usize = args
        .next()
        .map_or(3, |a| a.parse().expect("hops: a number"));
    let laps: usize = args
        .next()
        .map_or(500, |a| a.parse().expect("laps: a number"));
    let flags: Vec<String> = args.collect();
    let direct = flags.iter().any(|a| a == "direct");
    let app_writes = flags.iter().any(|a| a == "app");

    let server = runtime("ring-server-io");
    let listener = server
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("its address");
    server.spawn(serve(listener, hops, direct));

    let client = runtime("ring-client-io");
    let epoch = Instant::now();
    let (laps_tx, laps_rx) = mpsc::channel::<f64>();
    let (to_send, mut sending) = tokio_mpsc::unbounded_channel::<Frame>();
    let app_socket = client.block_on(async {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let (stream, duplicate) = if app_writes {
            let std = stream.into_std().expect("the socket, as std's");
            let duplicate = std.try_clone().expect("a duplicate of the socket");
            (
                TcpStream::from_std(std).expect("back to tokio"),
                Some(duplicate),
            )
        } else {
            (stream, None)
        };
        let (mut read, mut write) = stream.into_split();
        tokio::spawn(async move {
            while let Some(frame) = sending.recv().await {
                if write.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            let mut frame = [0; 16];
            while read.read_exact(&mut frame).await.is_ok() {
                let start = u64::from_le_bytes(frame[8..].try_into().expect("8 bytes"));
                let now = epoch.elapsed().as_nanos() as u64;
                if laps_tx.send((now - start) as f64 / 1e3).is_err() {
                    return;
                }
            }
        });
        duplicate
    });

    let mut laps_us = Vec::with_capacity(laps);
    for lap in 0..laps as u64 {
        thread::sleep(Duration::from_millis(20));
        let mut frame = [0; 16];
        frame[..8].copy_from_slice(&lap.to_le_bytes());
        frame[8..].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
        match &app_socket {
            Some(socket) => (&*socket)
                .write_all(&frame)
                .expect("the socket takes 16 bytes"),
            None => to_send.send(frame).expect("the client's writer runs"),
        }
        laps_us.push(laps_rx.recv().expect("the echo comes back"));
    }

    laps_us.sort_by(f64::total_cmp);
    let at = |q: f64| laps_us[((laps_us.len() - 1) as f64 * q).round() as usize];
    println!(
        "TCP loopback with {hops} parked hops in the server{}, {laps} laps at 50 a second: \
         p50 {:.0} us, p90 {:.0}, p99 {:.0}, max {:.0}",
        if direct {
            ", the last writing to the socket"
        } else {
            ""
        },
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}
