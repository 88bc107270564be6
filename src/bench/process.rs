//! Process sampling for `fairyring bench` (Linux `/proc`): resident memory and CPU time of the
//! bench itself and of the server it measures. Reads files only; on other systems every sample
//! is `None`.

/// Clock ticks per second of `/proc/*/stat` times (`USER_HZ`, 100 on every Linux ABI).
const TICKS_PER_SEC: f64 = 100.0;

/// Which process to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The bench process itself.
    Myself,
    /// Another process, by PID (the server).
    Pid(u32),
}

impl Target {
    fn dir(self) -> String {
        match self {
            Target::Myself => "/proc/self".into(),
            Target::Pid(pid) => format!("/proc/{pid}"),
        }
    }
}

/// Resident set size in KiB.
pub fn rss_kib(target: Target) -> Option<u64> {
    let status = std::fs::read_to_string(format!("{}/status", target.dir())).ok()?;
    parse_rss_kib(&status)
}

/// User + system CPU time in seconds.
pub fn cpu_seconds(target: Target) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("{}/stat", target.dir())).ok()?;
    parse_cpu_ticks(&stat).map(|ticks| ticks as f64 / TICKS_PER_SEC)
}

fn parse_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `utime + stime` from a `/proc/PID/stat` line. The command name (field 2) is in parentheses
/// and may itself hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state (3), ppid (4), … utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_name() {
        let line = "4242 (fairy ring) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    250 75 0 0 20 0 9 0 123456 1000000 2500 18446744073709551615";
        assert_eq!(parse_cpu_ticks(line), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        assert_eq!(parse_cpu_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn rss_is_read_from_status() {
        let status = "Name:\tfairyring\nVmPeak:\t  99999 kB\nVmRSS:\t   14392 kB\n";
        assert_eq!(parse_rss_kib(status), Some(14392));
        assert_eq!(parse_rss_kib("Name: x\n"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        if cfg!(target_os = "linux") {
            assert!(rss_kib(Target::Myself).is_some_and(|kib| kib > 0));
            assert!(cpu_seconds(Target::Myself).is_some());
        }
    }
}
