//! A PostgreSQL cluster of a test's own (initdb into a temporary directory, `pg_ctl` on a free
//! loopback port), so that a test may restart it or fill its disk without touching the
//! machine's shared PostgreSQL. Needs root (the server runs as the `postgres` user, started
//! with `runuser`) and Debian's `postgresql` package (`/usr/lib/postgresql/N/bin`), as CI has;
//! elsewhere [`PgCluster::start`] says why and answers `None`, unless
//! `FAIRYRING_REQUIRE_SERVICES=1` makes that a failure. Stopped (`-m immediate`) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running cluster of the test's own.
pub struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    /// The loopback port it listens on.
    pub port: u16,
    options: String,
    _dir: tempfile::TempDir,
}

/// The newest installed PostgreSQL's `bin` directory.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn skip(why: &str) -> Option<PgCluster> {
    super::services::unavailable("a PostgreSQL cluster of the test's own", &why);
    None
}

/// Runs a PostgreSQL program as the `postgres` user; its success, or what it said. What it
/// prints goes to a file, not a pipe: a server `pg_ctl` starts would hold a pipe open, and
/// reading it to its end would wait for the server to stop.
fn as_postgres(bin: &Path, program: &str, args: &[&str]) -> Result<(), String> {
    let out = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let err = out.reopen().map_err(|e| e.to_string())?;
    let status = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join(program))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.reopen().map_err(|e| e.to_string())?))
        .stderr(Stdio::from(err))
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        let said = std::fs::read_to_string(out.path()).unwrap_or_default();
        Err(format!("{program} {args:?}: {said}"))
    }
}

fn chown_postgres(path: &Path) -> Result<(), String> {
    let status = Command::new("chown")
        .args(["postgres:postgres"])
        .arg(path)
        .status()
        .map_err(|e| e.to_string())?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("chown {} failed", path.display()))
}

impl PgCluster {
    /// A fresh cluster with its data directory in a new temporary directory.
    pub fn start() -> Option<PgCluster> {
        Self::start_in(None)
    }

    /// A fresh cluster whose data directory is `data_in/data` when given (e.g. on a small
    /// filesystem the test mounted; it must be writable by `postgres`), with its WAL kept
    /// elsewhere then (in the cluster's own temporary directory), so that a full data
    /// directory is not a full WAL.
    pub fn start_in(data_in: Option<&Path>) -> Option<PgCluster> {
        let Some(bin) = bin_dir() else {
            return skip("no /usr/lib/postgresql/N/bin/initdb");
        };
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.starts_with(b"0"))
            .unwrap_or(false);
        if !is_root {
            return skip("not root (the cluster runs as the postgres user)");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        if let Err(why) = chown_postgres(dir.path()) {
            return skip(&why);
        }
        let data = data_in.unwrap_or(dir.path()).join("data");
        let data_s = data.display().to_string();
        let wal = data_in.map(|_| dir.path().join("wal").display().to_string());
        let mut args = vec![
            "-D",
            data_s.as_str(),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ];
        let waldir;
        if let Some(wal) = &wal {
            waldir = format!("--waldir={wal}");
            args.push(waldir.as_str());
        }
        if let Err(why) = as_postgres(&bin, "initdb", &args) {
            return skip(&why);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c max_connections=40",
            dir.path().display()
        );
        let cluster = PgCluster {
            bin,
            data,
            port,
            options,
            _dir: dir,
        };
        if let Err(why) = cluster.start_server() {
            return skip(&why);
        }
        Some(cluster)
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let data = self.data.display().to_string();
        let mut all = vec!["-D", data.as_str(), "-w", "-t", "60"];
        all.extend_from_slice(args);
        as_postgres(&self.bin, "pg_ctl", &all)
    }

    /// The cluster's URL (database `postgres`).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast` (what `pg_ctlcluster … restart` runs): every session is ended,
    /// the server checkpoints, stops and starts again; returns once it accepts connections.
    pub fn restart(&self) {
        self.pg_ctl(&["-m", "fast", "restart"])
            .expect("pg_ctl restart");
    }

    /// `pg_ctl stop -m fast`.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]).expect("pg_ctl stop");
    }

    /// `pg_ctl start` after [`PgCluster::stop`].
    pub fn start_again(&self) {
        self.start_server().expect("pg_ctl start");
    }

    fn start_server(&self) -> Result<(), String> {
        let log = self._dir.path().join("log").display().to_string();
        self.pg_ctl(&["-l", log.as_str(), "-o", self.options.as_str(), "start"])
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "stop"]);
    }
}
