//! A private tmux server for driving `ibscope tui` in a real terminal.

use std::process::Command;
use std::time::{Duration, Instant};

/// A private tmux server, killed on drop (also when the test panics).
pub struct Tmux {
    pub socket: String,
}

impl Tmux {
    /// A server of its own (`prefix` and a unique suffix) running `script` under bash in a
    /// 160x48 window named `ui`.
    pub fn start(prefix: &str, script: &str) -> Tmux {
        let tmux = Tmux {
            socket: super::unique_name(prefix),
        };
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "ui",
            "-x",
            "160",
            "-y",
            "48",
            "bash",
            "-c",
            script,
        ]);
        tmux
    }
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-t", "ui", "-p"])
    }
    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "ui", keys]);
    }
    /// Wait until the screen contains all of `needles`.
    pub fn wait_for(&self, needles: &[&str], within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let s = self.screen();
            if needles.iter().all(|n| s.contains(n)) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("screen never showed {needles:?}:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
