//! Private runtime directories of the commands that start processes (`serve`'s relay
//! agents, the simulator's daemons): `ibscope-<what>-<pid>-<n>-<hex>` under the temporary
//! directory, mode 0700. The processes a command starts run there (the simulator's shim
//! keeps its fake sysfs `sys-<pid>` in the working directory, an agent's included), and
//! the command removes the directory on every way out. A process killed before it could
//! (SIGKILL) leaves its directory behind: the next command that makes one of the same kind
//! removes those whose process is gone.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Create a fresh runtime directory for `what` ("sim", "demo", "serve"); the caller removes
/// it.
pub fn make(what: &str) -> io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let prefix = format!("ibscope-{what}-");
    remove_stale(&base, &prefix);
    for _ in 0..100 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!(
            "{prefix}{}-{}-{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                let why = format!("creating {}: {e}", dir.display());
                return Err(io::Error::new(e.kind(), why));
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "could not create a runtime directory under {}",
            base.display()
        ),
    ))
}

/// Remove `<prefix><pid>-...` directories under `base` whose process is gone (once per
/// prefix and process).
fn remove_stale(base: &Path, prefix: &str) {
    static DONE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    {
        let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
        if done.iter().any(|p| p == prefix) {
            return;
        }
        done.push(prefix.to_string());
    }
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A runtime directory removed when dropped.
#[derive(Debug)]
pub struct RuntimeDir(PathBuf);

impl RuntimeDir {
    pub fn create(what: &str) -> io::Result<RuntimeDir> {
        make(what).map(RuntimeDir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_private_removed_on_drop_and_stale_ones_swept() {
        let base = std::env::temp_dir();
        // A directory of a process that is gone (PID 0 never names one in /proc here).
        let stale = base.join(format!(
            "ibscope-unittest-999999999-0-{:x}",
            std::process::id()
        ));
        fs::create_dir_all(stale.join("sys-1")).unwrap();
        let dir = RuntimeDir::create("unittest").unwrap();
        assert!(!stale.exists(), "the stale directory was not removed");
        let mode = fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let name = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(
            name.starts_with(&format!("ibscope-unittest-{}-", std::process::id())),
            "{name}"
        );
        let path = dir.path().to_path_buf();
        fs::write(path.join("x"), "y").unwrap();
        drop(dir);
        assert!(!path.exists());
    }
}
