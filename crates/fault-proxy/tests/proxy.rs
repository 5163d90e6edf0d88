//! The proxy copies bytes both ways, and kills what it is told to: all, one, or one every
//! interval; dropping it ends every connection through it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zerodispatch_fault_proxy::FaultProxy;

/// An echo server on a loopback port.
async fn echo() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0; 64];
                while let Ok(n @ 1..) = s.read(&mut buf).await {
                    if s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// A client through the proxy, checked to be linked (an echo round trip).
async fn linked(proxy: &FaultProxy) -> TcpStream {
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut back = [0; 4];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping");
    s
}

/// Waits up to 5 s, polling every 10 ms, until `done` holds.
async fn until(done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether the connection was closed under the client: a read ends (0) or fails.
async fn closed(s: &mut TcpStream) -> bool {
    let _ = s.write_all(b"x").await;
    let mut buf = [0; 8];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn kill_all_closes_every_connection_and_new_ones_still_link() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    let mut a = linked(&proxy).await;
    let mut b = linked(&proxy).await;
    assert_eq!(proxy.live(), 2);
    assert_eq!(proxy.kill_all(), 2);
    assert!(closed(&mut a).await && closed(&mut b).await);
    assert_eq!((proxy.live(), proxy.killed()), (0, 2));
    let _c = linked(&proxy).await;
    assert_eq!(proxy.live(), 1);
}

#[tokio::test]
async fn kill_one_closes_exactly_one() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    assert!(!proxy.kill_one(), "nothing to kill");
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(linked(&proxy).await);
    }
    assert!(proxy.kill_one());
    let mut dead = 0;
    for s in &mut streams {
        // A live one echoes; the dead one is closed.
        s.write_all(b"ok").await.unwrap_or(());
        let mut buf = [0; 2];
        match tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await {
            Ok(Ok(_)) => assert_eq!(&buf, b"ok"),
            _ => dead += 1,
        }
    }
    assert_eq!(dead, 1);
    assert_eq!((proxy.live(), proxy.killed()), (2, 1));
}

#[tokio::test]
async fn a_connection_that_ends_by_itself_leaves_the_table() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    let s = linked(&proxy).await;
    drop(s);
    until(|| proxy.live() == 0).await;
    assert_eq!((proxy.live(), proxy.killed()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_every_kills_until_stopped_and_drop_ends_the_rest() {
    let mut proxy = FaultProxy::start(echo().await).await.unwrap();
    let mut streams = Vec::new();
    for _ in 0..4 {
        streams.push(linked(&proxy).await);
    }
    proxy.kill_every(Duration::from_millis(20));
    until(|| proxy.killed() >= 2).await;
    proxy.stop_killing();
    let killed = proxy.killed();
    assert!(killed >= 2, "killed {killed}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(proxy.killed(), killed, "stopped");
    assert_eq!(proxy.live() as u64, 4 - killed);
    drop(proxy);
    for s in &mut streams {
        assert!(closed(s).await, "every connection ends with the proxy");
    }
}
