//! A loopback TCP proxy that can drop every connection through it on demand: connection
//! loss for tests against any server, the real one included.

use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct KillProxy {
    pub addr: std::net::SocketAddr,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl KillProxy {
    /// A proxy on a free loopback port to `upstream`, on the current runtime.
    pub async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accepted = Arc::clone(&links);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Ok(mut server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let link = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                let mut links = accepted.lock().unwrap();
                links.retain(|l| !l.is_finished());
                links.push(link);
            }
        });
        Self { addr, links }
    }

    /// Drops every connection through the proxy now (both sides see it closed); returns
    /// how many.
    pub fn kill_all(&self) -> usize {
        let links = std::mem::take(&mut *self.links.lock().unwrap());
        let live = links.iter().filter(|l| !l.is_finished()).count();
        for link in links {
            link.abort();
        }
        live
    }
}
