//! CPU time of this process and of some of its threads, read from `/proc` (Linux; `None`
//! elsewhere), without libc: `utime` and `stime` of `/proc/self/stat` (the process, every
//! thread that ever ran in it) and of `/proc/self/task/<tid>/stat` (one thread, while it
//! lives), in clock ticks of `USER_HZ`, which the kernel fixes at 100 per second for every
//! user-space interface on every architecture it supports: a resolution of 10 ms.

use std::time::Duration;

/// Clock ticks per second of the `/proc` interfaces (`USER_HZ`).
const USER_HZ: u64 = 100;

/// The comm (between the parentheses, which may itself hold spaces and parentheses: the
/// last `)` closes it) and the user plus system ticks of one `stat` line.
fn parse_stat(line: &str) -> Option<(&str, u64)> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?;
    // After the comm: state (field 3), ... utime (field 14), stime (field 15).
    let mut fields = line.get(close + 1..)?.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((comm, utime + stime))
}

fn ticks(ticks: u64) -> Duration {
    Duration::from_millis(ticks * (1000 / USER_HZ))
}

/// CPU time (user and system) this process has used so far, all its threads included.
#[must_use]
pub fn process() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat).map(|(_, t)| ticks(t))
}

/// CPU time used so far by the live threads of this process whose name starts with
/// `prefix` (a thread that has exited is no longer counted).
#[must_use]
pub fn threads(prefix: &str) -> Option<Duration> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        if let Some((comm, t)) = parse_stat(&stat)
            && comm.starts_with(prefix)
        {
            total += t;
        }
    }
    Some(ticks(total))
}

/// The broker threads' CPU time as the run read it just before it stopped them
/// ([`note_broker_threads`]): once stopped, a thread is no longer in `/proc/self/task`.
static NOTED: std::sync::Mutex<Option<Duration>> = std::sync::Mutex::new(None);

/// Notes the CPU time of the broker's threads (`zd-`) now: the run calls it just before
/// it shuts the broker (or the local server) down, and [`Start::elapsed`] reads it.
pub fn note_broker_threads() {
    *NOTED.lock().unwrap_or_else(|p| p.into_inner()) = threads(BROKER_THREADS);
}

/// CPU time of a run: of the whole process, and of the broker's threads (processors and,
/// over TCP with the local server, the server's I/O threads: every thread named `zd-`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CpuTime {
    /// Seconds of CPU the perftest's process used during the run (user and system).
    pub process_s: f64,
    /// Seconds of CPU its `zd-` threads used (the broker's, the local server's), read just
    /// before the run stopped them (a server killed and restarted during the run takes
    /// its threads' time with it).
    pub broker_threads_s: f64,
    /// The run's wall-clock seconds, to read the two above as a share of a core.
    pub wall_s: f64,
}

/// A reading at the start of a run, to take the run's [`CpuTime`] from at its end.
#[derive(Clone, Copy, Debug)]
pub struct Start {
    process: Option<Duration>,
    broker: Option<Duration>,
    wall: std::time::Instant,
}

impl Start {
    /// Reads now.
    #[must_use]
    pub fn now() -> Self {
        Self {
            process: process(),
            broker: threads(BROKER_THREADS),
            wall: std::time::Instant::now(),
        }
    }

    /// The CPU time since the reading; `None` where `/proc` cannot be read.
    #[must_use]
    pub fn elapsed(&self) -> Option<CpuTime> {
        let process = process()?.saturating_sub(self.process?);
        let noted = NOTED.lock().unwrap_or_else(|p| p.into_inner()).take();
        let broker = noted
            .or_else(|| threads(BROKER_THREADS))?
            .saturating_sub(self.broker.unwrap_or_default());
        Some(CpuTime {
            process_s: process.as_secs_f64(),
            broker_threads_s: broker.as_secs_f64(),
            wall_s: self.wall.elapsed().as_secs_f64(),
        })
    }
}

/// The name prefix of the broker's threads: processors (`zd-queue-0`, ...) and the
/// server's I/O threads (`zd-server-io`).
const BROKER_THREADS: &str = "zd-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_parsed_past_a_comm_with_spaces_and_parentheses() {
        let line = "1234 (zd-q (1) x) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 9 0";
        assert_eq!(parse_stat(line), Some(("zd-q (1) x", 281)));
        assert_eq!(ticks(281), Duration::from_millis(2810));
        assert_eq!(parse_stat("no parentheses"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu_and_spinning_adds_to_it() {
        let Some(before) = process() else {
            return; // not Linux
        };
        let start = std::time::Instant::now();
        let mut x = 0_u64;
        while start.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = process().expect("read once, read again");
        assert!(after >= before);
        assert!(threads("").is_some());
    }
}
