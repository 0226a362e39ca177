//! A TCP proxy that delays every byte a fixed time in each direction: a slow link between the
//! controller and a node, made without netem (this kernel has no `sch_netem`). Each chunk read
//! from one side is written to the other `delay` after it was read, in order, while later chunks
//! are already being read: latency is added, throughput is not cut (as on a long link). TLS
//! passes through untouched, so the agent's certificate is checked end to end; the proxy listens
//! on the agent's own address (another port), which the certificate names.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A running proxy; stops (and cuts its connections) on drop.
pub struct DelayProxy {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on `listen` (port 0: any free one) and forwards to `upstream`, `delay` each way.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr, delay: Duration) -> Self {
        let listener = TcpListener::bind(listen)
            .await
            .expect("bind the delay proxy");
        let addr = listener.local_addr().expect("proxy address");
        let task = tokio::spawn(async move {
            // Dropped with the accept loop: every connection ends with the proxy.
            let mut links = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                links.spawn(link(client, upstream, delay));
                while links.try_join_next().is_some() {}
            }
        });
        DelayProxy { addr, task }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn link(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        one_way(client_read, server_write, delay),
        one_way(server_read, client_write, delay),
    );
}

/// Copies `from` into `to`, each chunk `delay` after it was read; an end of stream is passed on
/// (as a shutdown of the write side) `delay` late too.
async fn one_way(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from.read(&mut buf).await.unwrap_or(0);
            // An empty chunk is the end of the stream.
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
                || n == 0
            {
                return;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if chunk.is_empty() || to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
