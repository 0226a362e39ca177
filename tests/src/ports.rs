//! Host port ranges that no two tests share, in this process or any other: each range is claimed
//! with an exclusive `flock` on a file under the temp dir, held until the range is dropped. No
//! range overlaps the kernel's ephemeral ports (`ip_local_port_range`): an outgoing connection
//! (a pooled database connection, say) may hold one of those for minutes, and an LXD proxy
//! device cannot listen on a port a connection holds.

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;

use nix::fcntl::{Flock, FlockArg};

/// First port handed out and the size of each block.
const FIRST: u16 = 20000;
const BLOCK: u16 = 64;
const BLOCKS: u16 = 600;

pub struct PortRange {
    first: u16,
    len: u16,
    _lock: Flock<File>,
}

/// The kernel's ephemeral ports, inclusive; Linux's default when the file cannot be read.
fn ephemeral_ports() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .unwrap_or((32768, 60999))
}

fn lock_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("cohort-test-ports");
    std::fs::create_dir_all(&dir).expect("create port lock dir");
    dir
}

impl PortRange {
    /// Claims a block of 64 consecutive ports on 127.0.0.1, all free at the time of the claim.
    pub fn claim() -> Self {
        let dir = lock_dir();
        let (low, high) = ephemeral_ports();
        let start = (std::process::id() as u16).wrapping_mul(7) % BLOCKS;
        for i in 0..BLOCKS {
            let block = (start + i) % BLOCKS;
            let first = FIRST + block * BLOCK;
            if first <= high && low < first + BLOCK {
                continue;
            }
            let path = dir.join(format!("block-{block}"));
            let file = File::create(&path).expect("create port lock file");
            let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
                continue;
            };
            let all_free =
                (first..first + BLOCK).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
            if all_free {
                return PortRange {
                    first,
                    len: BLOCK,
                    _lock: lock,
                };
            }
        }
        panic!(
            "no free block of {BLOCK} ports between {FIRST} and {} outside the ephemeral ports \
             {low}-{high}",
            FIRST + BLOCK * BLOCKS
        );
    }

    pub fn first(&self) -> u16 {
        self.first
    }

    /// Inclusive last port.
    pub fn last(&self) -> u16 {
        self.first + self.len - 1
    }

    /// The n-th port of the range.
    pub fn port(&self, n: u16) -> u16 {
        assert!(n < self.len, "port {n} is outside a range of {}", self.len);
        self.first + n
    }
}
