//! What an operator reads and types: every command's --help has examples, the man pages
//! are valid roff that names every command, and the shell completions parse and complete.
//! No fabric needed.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Every command path under `ibscope` (e.g. `["route", "trace"]`), the root as `[]`.
fn command_paths() -> Vec<Vec<String>> {
    let mut root = ibscope::app::command();
    root.build();
    let mut out = Vec::new();
    let mut pending = vec![(root, Vec::<String>::new())];
    while let Some((cmd, path)) = pending.pop() {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            pending.push((sub.clone(), p));
        }
        out.push(path);
    }
    out.sort();
    out
}

fn top_level_commands() -> Vec<String> {
    command_paths()
        .into_iter()
        .filter(|p| p.len() == 1)
        .map(|p| p[0].clone())
        .collect()
}

#[test]
fn every_command_help_has_examples_of_itself() {
    let paths = command_paths();
    // The tree is what the binary has: all 17 top-level commands and their subcommands.
    assert!(paths.len() > 30, "{paths:?}");
    for expected in ["check", "serve", "config", "completions", "man"] {
        assert!(
            top_level_commands().iter().any(|c| c == expected),
            "{expected}"
        );
    }
    let mut missing = Vec::new();
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = assert_success(&ibscope_plain(&args, &[]));
        let Some((_, examples)) = help.split_once("\nExamples:\n") else {
            missing.push(format!("ibscope {}: no Examples section", path.join(" ")));
            continue;
        };
        // At least one example line, and each one runs this command (or sets up for it).
        let lines: Vec<&str> = examples
            .lines()
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        let invocation = format!("ibscope {}", path.join(" "));
        // Options may sit between the words (`ibscope sim fault --resweep unlink ...`).
        let own = lines.iter().any(|l| {
            let words: Vec<&str> = l
                .split_whitespace()
                .filter(|w| !w.starts_with('-'))
                .collect();
            words.join(" ").contains(invocation.trim())
        });
        if lines.is_empty() || !own {
            missing.push(format!(
                "{invocation}: examples do not show `{invocation}`: {lines:?}"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The README's commands table has a row for every command a user can type.
#[test]
fn readme_commands_table_names_every_command() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let table: Vec<&str> = readme
        .split("## Commands")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let missing: Vec<String> = top_level_commands()
        .into_iter()
        .filter(|c| {
            let named = |l: &&str| {
                l.contains(&format!("`ibscope {c}`"))
                    || l.contains(&format!("`ibscope {c} "))
                    || l.contains(&format!("`ibscope -C all {c}"))
            };
            !table.iter().any(named)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README's commands table lacks {missing:?}"
    );
}

#[test]
fn man_pages_are_valid_roff_and_name_every_command() {
    let dir = temp_dir();
    let out = ibscope_plain(&["man", "--dir", &dir.path().display().to_string()], &[]);
    assert_success(&out);
    let paths = command_paths();
    for path in &paths {
        let name = std::iter::once("ibscope")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("-");
        let page = dir.path().join(format!("{name}.1"));
        let text =
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(text.contains(&format!(".TH {name} 1")), "{name}: no .TH");
        assert_roff_ok(&page);
    }
    let pages = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(pages, paths.len(), "one page per command, nothing else");

    // The main page lists every command, and tells the version.
    let main = std::fs::read_to_string(dir.path().join("ibscope.1")).unwrap();
    for cmd in top_level_commands() {
        assert!(
            main.contains(&format!("ibscope\\-{}(1)", cmd.replace('-', "\\-"))),
            "ibscope.1 does not list {cmd}"
        );
    }
    assert!(main.contains(env!("CARGO_PKG_VERSION")));

    // One page on stdout, as `ibscope man route trace | man -l -` reads it.
    let one = assert_success(&ibscope_plain(&["man", "route", "trace"], &[]));
    assert_eq!(
        one,
        std::fs::read_to_string(dir.path().join("ibscope-route-trace.1")).unwrap()
    );
    let rendered = render_man(&one);
    assert!(rendered.contains("ibtracert"), "{rendered}");
    assert!(rendered.contains("Examples:"), "{rendered}");
    let err = ibscope_plain(&["man", "nosuch"], &[]);
    assert_exit(&err, 2);
    assert!(stderr(&err).contains("no command `ibscope nosuch`"));
}

/// groff parses the page with every warning enabled and says nothing. `-k` runs preconv
/// first, as man-db does, so UTF-8 text in the help (such as "≥") is read as such.
fn assert_roff_ok(page: &Path) {
    let out = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .arg(page)
        .output()
        .expect("groff (Debian: groff-base; scripts/install-deps.sh installs it)");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The page as a terminal shows it (groff's own rendering).
fn render_man(roff: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-P-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("groff");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(roff.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // Strip overstrike (bold/underline) sequences.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut clean = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\u{8}') {
            chars.next();
            continue;
        }
        clean.push(c);
    }
    clean
}

/// The script `ibscope completions SHELL` prints, saved in `dir` (a completion script is
/// too long for one command-line argument).
fn completion_file(dir: &Path, shell: &str) -> std::path::PathBuf {
    let script = assert_success(&ibscope_plain(&["completions", shell], &[]));
    let path = dir.join(format!("ibscope.{shell}"));
    std::fs::write(&path, script).unwrap();
    path
}

/// Run `script` in bash with the completion loaded; returns its stdout.
fn bash_with_completion(script: &str) -> String {
    let dir = temp_dir();
    let completion = completion_file(dir.path(), "bash");
    let full = format!("source '{}'\n{script}", completion.display());
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &full])
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the completion offers after `ibscope WORDS...` (the last word being completed).
fn complete(words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cur = words.last().unwrap();
    let prev = words[words.len() - 2];
    let script = format!(
        "COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; \
         _ibscope ibscope '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        quoted.join(" "),
        words.len() - 1,
        words.join(" ")
    );
    bash_with_completion(&script)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_parses_and_completes_commands_flags_and_values() {
    let dir = temp_dir();
    let script = completion_file(dir.path(), "bash");
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("bash");
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Every command at every level is in the script.
    let text = std::fs::read_to_string(&script).unwrap();
    for path in command_paths().iter().filter(|p| !p.is_empty()) {
        assert!(
            text.contains(path.last().unwrap().as_str()),
            "bash completion lacks {path:?}"
        );
    }
    // Every command is offered at the top, and only what matches what was typed.
    let all = complete(&["ibscope", ""]);
    for cmd in top_level_commands() {
        assert!(all.contains(&cmd), "{cmd} not offered: {all:?}");
    }
    let mut co = complete(&["ibscope", "co"]);
    co.sort();
    assert_eq!(co, ["completions", "config", "counters"]);
    assert_eq!(
        complete(&["ibscope", "serve", "--swi"]),
        ["--switches-only"]
    );
    let mut families = complete(&["ibscope", "serve", "--counters", ""]);
    families.sort();
    assert_eq!(families, ["all", "data", "errors"]);
    assert_eq!(complete(&["ibscope", "route", "tr"]), ["trace"]);
}

#[test]
fn zsh_and_fish_completions_know_every_command() {
    let dir = temp_dir();
    for shell in ["zsh", "fish"] {
        let file = completion_file(dir.path(), shell);
        let script = std::fs::read_to_string(&file).unwrap();
        for path in command_paths().iter().filter(|p| p.len() > 1) {
            let leaf = path.last().unwrap();
            assert!(
                script.contains(leaf.as_str()),
                "{shell} completion lacks {path:?}"
            );
        }
        for cmd in top_level_commands() {
            let named = match shell {
                "zsh" => script.contains(&format!("'{cmd}:")),
                _ => script.contains(&format!("-a \"{cmd}\"")),
            };
            assert!(named, "{shell} completion does not offer {cmd}");
        }
        // Syntax-checked where the shell is installed (CI does not install zsh or fish).
        let (checker, flag) = match shell {
            "zsh" => ("zsh", "-n"),
            _ => ("fish", "--no-execute"),
        };
        let mut cmd = Command::new(checker);
        cmd.arg(flag).arg(&file);
        match cmd.output() {
            Ok(out) => assert!(
                out.status.success(),
                "{shell}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(_) => eprintln!("{shell} is not installed: syntax not checked"),
        }
    }
    let bad = ibscope_plain(&["completions", "tcsh"], &[]);
    assert_exit(&bad, 2);
}

/// `--help` reads as a man page: the command's own options, then the fabric options under
/// their heading (only where the command takes them), then the options every command
/// takes, and the examples last.
#[test]
fn help_puts_own_options_first_fabric_options_apart_and_examples_last() {
    let mut out_of_order = Vec::new();
    for path in command_paths() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = assert_success(&ibscope_plain(&args, &[]));
        let at = |heading: &str| help.find(&format!("\n{heading}\n"));
        let (options, common) = (at("Options:"), at("Common options:"));
        let (fabric, examples) = (at("Fabric options:"), at("Examples:"));
        let name = format!("ibscope {}", path.join(" "));
        let order = [options, fabric, common, examples];
        let present: Vec<usize> = order.iter().flatten().copied().collect();
        if present.windows(2).any(|w| w[0] > w[1]) || examples.is_none() {
            out_of_order.push(format!("{name}: headings out of order {order:?}"));
        }
        // A fabric option is listed under its heading or not at all.
        let mut pos = 0;
        for line in help.split_inclusive('\n') {
            let option = line.trim_start();
            let is_fabric = [
                "--timeout-ms ",
                "--m-key ",
                "--topology ",
                "--node-name-map ",
            ]
            .iter()
            .any(|flag| option.starts_with(flag));
            if is_fabric && fabric.map_or(true, |f| pos < f) {
                out_of_order.push(format!("{name}: {} outside Fabric options", option.trim()));
            }
            pos += line.len();
        }
    }
    assert!(out_of_order.is_empty(), "{}", out_of_order.join("\n"));
}

/// Fabric options may come before the command, as infiniband-diags' users write them: the
/// command that takes them reads them, one that does not refuses them (exit 2).
#[test]
fn fabric_options_before_the_command_reach_it_or_are_refused() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fabrics/net");
    let file = file.to_str().unwrap();
    let after = assert_success(&ibscope_plain(&["links", "--topology", file], &[]));
    let before = assert_success(&ibscope_plain(&["--topology", file, "links"], &[]));
    assert_eq!(before, after);
    assert!(after.contains("Switch1"), "{after}");
    let refused = ibscope_plain(&["--topology", file, "completions", "bash"], &[]);
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("'--topology'"),
        "{}",
        stderr(&refused)
    );
    // A live-fabric command has no --topology: refused, not silently read from the fabric.
    let query = ibscope_plain(&["--topology", file, "query", "nodeinfo", "1"], &[]);
    assert_exit(&query, 2);
    assert!(
        stderr(&query).contains("'--topology'"),
        "{}",
        stderr(&query)
    );
}

/// The files the docs speak from: every Markdown file of the repository and the comments
/// of every Cargo.toml (where a dependency says why it is there).
fn doc_texts() -> Vec<(String, String)> {
    let root = repo_root();
    let listed = Command::new("git")
        .args(["ls-files", "*.md", "Cargo.toml", "*/Cargo.toml"])
        .current_dir(&root)
        .output()
        .expect("git");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        // What a capture's notes say of the machine it came from is not the repository.
        .filter(|name| !name.starts_with("tests/data/"))
        .map(|name| {
            let text = std::fs::read_to_string(root.join(name)).unwrap();
            let text = if name.ends_with("Cargo.toml") {
                let comments = text.lines().filter_map(|l| l.trim().strip_prefix('#'));
                comments.collect::<Vec<_>>().join("\n")
            } else {
                text
            };
            (name.to_string(), text)
        })
        .collect()
}

/// The words of `text` that name a file or directory of the repository: relative paths
/// (`src/cmd/serve.rs`, `tests/it/`, `docs/exporter.md`) and source files by name
/// (`wire.rs`). Examples stand for any name (`<name>`, `*`, `FILE`); places on a machine
/// (`/etc/...`, `~/...`) and what a build writes (`target/`) are not the repository's.
fn named_paths(text: &str) -> Vec<String> {
    const EXTENSIONS: &[&str] = &["rs", "md", "toml", "json", "sh", "txt", "yml", "csv"];
    let mut out = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "`()[],;\"'|".contains(c)) {
        let word = word.trim_end_matches([':', '.']);
        let word = word.split(':').next().unwrap_or_default();
        if word.is_empty()
            || word.starts_with(['/', '~', '$', '-', '.'])
            || word.contains(['<', '>', '*', '{', '=', '@'])
            || word.contains("://")
            || !word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        {
            continue;
        }
        let extension = word.rsplit_once('.').map(|(_, e)| e);
        let in_a_directory = word.trim_end_matches('/').contains('/');
        let named = if in_a_directory {
            word.ends_with('/') || extension.is_some_and(|e| EXTENSIONS.contains(&e))
        } else {
            extension == Some("rs")
        };
        if named && !word.starts_with("target/") {
            out.push(word.to_string());
        }
    }
    out
}

/// Every path the docs name exists: from the repository's root or a crate's, or (a bare
/// file name, as the tables of docs/ARCHITECTURE.md give them) somewhere in the tree.
#[test]
fn every_path_the_docs_name_exists() {
    let root = repo_root();
    let listed = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .expect("git");
    let files: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let crates = [
        "",
        "mad/",
        "topo/",
        "host/",
        "tui/",
        "exporter/",
        "sim/",
        "nccl/",
        "fuzz/",
    ];
    let exists = |path: &str| {
        let bare = !path.trim_end_matches('/').contains('/');
        crates.iter().any(|c| {
            [format!("{c}{path}"), format!("{c}src/{path}")]
                .iter()
                .any(|p| {
                    files
                        .iter()
                        .any(|f| f == p || f.starts_with(p.as_str()) && p.ends_with('/'))
                })
        }) || (bare
            && files
                .iter()
                .any(|f| f.ends_with(&format!("/{path}")) || f == path))
    };
    let mut missing = Vec::new();
    for (doc, text) in doc_texts() {
        // A Markdown link is relative to the document's own folder.
        let dir = Path::new(&doc)
            .parent()
            .and_then(Path::to_str)
            .unwrap_or("");
        for path in named_paths(&text) {
            let beside = format!("{dir}/{path}");
            if !exists(&path) && (dir.is_empty() || !exists(&beside)) {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}

/// The sentences of a help text long enough to say something, whitespace folded.
fn sentences(help: &str) -> Vec<String> {
    let folded = help.split_whitespace().collect::<Vec<_>>().join(" ");
    folded
        .split(". ")
        .map(|s| s.trim().trim_end_matches('.').to_string())
        .filter(|s| s.split(' ').count() >= 6)
        .collect()
}

/// A command's help says each thing once: no sentence of it twice (its description, its
/// options' help, the text after them).
#[test]
fn every_help_says_each_thing_once() {
    let mut repeated = Vec::new();
    for path in command_paths() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = assert_success(&ibscope_plain(&args, &[]));
        let all = sentences(&help);
        for (i, s) in all.iter().enumerate() {
            if all[..i].contains(s) && !repeated.iter().any(|(_, r)| r == s) {
                repeated.push((path.join(" "), s.clone()));
            }
        }
    }
    let lines: Vec<String> = repeated
        .iter()
        .map(|(cmd, s)| format!("ibscope {cmd}: {s}"))
        .collect();
    assert!(lines.is_empty(), "said twice:\n{}", lines.join("\n"));
}

#[test]
fn the_path_and_sentence_finders_find_what_they_are_for() {
    let text = "See `src/cmd/serve.rs` and tests/it/, `wire.rs` (mad), not /etc/x.toml, \
                ~/.config/y.toml, docs/json/<name>.schema.json, target/assets/, l.json or \
                FILE.1; ok: fuzz/Cargo.toml.";
    assert_eq!(
        named_paths(text),
        [
            "src/cmd/serve.rs",
            "tests/it/",
            "wire.rs",
            "fuzz/Cargo.toml"
        ]
    );
    let help = "It stops on SIGTERM and exits 0 after that.\n\nMore text here.\n  It stops on \
                SIGTERM and\n exits 0 after that. Short.";
    assert_eq!(
        sentences(help),
        [
            "It stops on SIGTERM and exits 0 after that",
            "More text here",
            "It stops on SIGTERM and exits 0 after that"
        ][..]
            .iter()
            .filter(|s| s.split(' ').count() >= 6)
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    );
}
