//! Every client a test runs ends: `lxc`, `incus`, `ssh` and `cohort` are run under a deadline
//! ([`output_within`]), killed past it, and the test fails naming the command and what it had
//! printed. A client that never returns (LXD 5.0.2's `lxc exec` now and then waits for ever on a
//! command that has ended, as canonical/lxd#3575 describes) would otherwise hold the test, and the
//! whole run, until CI's own limit, with nothing said about where.
//!
//! [`Watchdog`] covers what no single command bounds: a test still running [`TEST_LIMIT`] after
//! its cluster or project was made prints its name and the processes it runs, then ends the test
//! binary, so the run fails within CI's time saying which test hung and on what.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long any one client command may run in a test: far past the slowest the suite makes (an
/// image import or a class's `provision --wait` on a loaded machine, a few minutes), short of a
/// hang costing the run its time.
pub const BOUND: Duration = Duration::from_secs(600);

/// How long one test may hold a [`Watchdog`]: well past the longest test of the suite (the
/// whole serial binary, one test at a time, takes about 20 minutes).
pub const TEST_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Set by [`no_test_limit`]: watchdogs are armed no more.
static UNLIMITED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For a program that is no test (the benchmarks, whose soak runs an hour): the harness it
/// uses arms no [`Watchdog`].
pub fn no_test_limit() {
    UNLIMITED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// `command`'s output (stdin empty), as `Command::output` gives it, provided it ends within
/// `within`; past that it is killed and the calling test panics naming it.
pub fn output_within(command: &mut Command, within: Duration) -> Output {
    output_with_input_within(command, b"", within)
}

/// [`output_within`] with `input` written to the command's stdin.
pub fn output_with_input_within(command: &mut Command, input: &[u8], within: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e} (run scripts/setup)", shown(command)));
    // Each stream is read on its own thread, so a command writing much to one never blocks on
    // a full pipe while this one waits for it to end.
    let stdout = Drain::start(child.stdout.take().expect("piped stdout"));
    let stderr = Drain::start(child.stderr.take().expect("piped stderr"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let deadline = Instant::now() + within;
    let status = loop {
        match child.try_wait().expect("wait for a client command") {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => break None,
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "`{}` did not end within {within:?} and was killed\nits stdout: {}\nits stderr: {}",
            shown(command),
            tail(&String::from_utf8_lossy(&stdout.finish())),
            tail(&String::from_utf8_lossy(&stderr.finish()))
        );
    };
    Output {
        status,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
    }
}

/// One of a command's output streams, read to its end on a thread of its own.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    ended: std::sync::mpsc::Receiver<()>,
}

impl Drain {
    fn start(mut from: impl Read + Send + 'static) -> Self {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (done, ended) = std::sync::mpsc::channel();
        let into = Arc::clone(&bytes);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                into.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
            }
            let _ = done.send(());
        });
        Drain { bytes, ended }
    }

    /// What the stream carried, once it ended or, when something the command left running
    /// still holds it open, once [`DRAIN_GRACE`] has passed after the command ended.
    fn finish(self) -> Vec<u8> {
        let _ = self.ended.recv_timeout(DRAIN_GRACE);
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// How long a stream is read after its command ended.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// The program and its arguments, as a person would type them.
fn shown(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last 2,000 bytes of `text`, on a character boundary.
fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(2000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The tests now holding a watchdog: its id, the test's name, when it was armed.
type Armed = Vec<(u64, String, Instant)>;

fn armed() -> &'static Arc<Mutex<Armed>> {
    static ARMED: OnceLock<Arc<Mutex<Armed>>> = OnceLock::new();
    ARMED.get_or_init(|| {
        let armed = Arc::new(Mutex::new(Armed::new()));
        let watched = Arc::clone(&armed);
        std::thread::Builder::new()
            .name("test-watchdog".into())
            .spawn(move || watch(&watched, limit()))
            .expect("start the test watchdog");
        armed
    })
}

/// [`TEST_LIMIT`], or `COHORT_TEST_LIMIT_S` seconds where set.
fn limit() -> Duration {
    std::env::var("COHORT_TEST_LIMIT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(TEST_LIMIT)
}

/// Checks every few seconds; ends the process once a test has held its watchdog past `limit`.
fn watch(armed: &Mutex<Armed>, limit: Duration) {
    loop {
        std::thread::sleep(Duration::from_secs(2).min(limit));
        let late = armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(_, _, since)| since.elapsed() > limit)
            .map(|(_, name, _)| name.clone());
        if let Some(name) = late {
            // Straight to fd 2: libtest captures what `eprintln!` prints from a test's threads,
            // and that capture would be lost with the process.
            let report = format!(
                "[watchdog] test {name} still running after {limit:?}; ending the test binary. \
                 The processes it ran:\n{}\n",
                children()
            );
            let _ = std::io::stderr().write_all(report.as_bytes());
            std::process::abort();
        }
    }
}

/// `ps` of this process's descendants: what a hung test was waiting on.
fn children() -> String {
    let Ok(out) = Command::new("ps")
        .args(["-e", "--forest", "-o", "pid=,ppid=,etime=,args="])
        .output()
    else {
        return "(ps failed)".into();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut ours = vec![std::process::id().to_string()];
    let mut kept = Vec::new();
    // `--forest` lists each process after its parent, so one pass finds every descendant.
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(pid), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if ours.iter().any(|p| p == ppid) {
            ours.push(pid.to_string());
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// Armed for the test that made it (its thread's name, which libtest sets to the test's);
/// disarmed when dropped. Never armed after [`no_test_limit`].
pub struct Watchdog {
    id: Option<u64>,
}

impl Watchdog {
    pub fn arm() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if UNLIMITED.load(Ordering::Relaxed) {
            return Watchdog { id: None };
        }
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current()
            .name()
            .unwrap_or("(a test)")
            .to_string();
        armed()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, name, Instant::now()));
        Watchdog { id: Some(id) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let Some(mine) = self.id else {
            return;
        };
        armed()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _, _)| *id != mine);
    }
}
