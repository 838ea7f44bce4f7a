//! The layering rule of CONTRIBUTING.md: inside a crate, no file imports a file that
//! imports it back. A file "imports" another when its code (not its comments, not its test
//! module, not a macro's `$crate::` paths) names a path into it: `crate::a::b::Item`,
//! `super::b::Item`, or in a `mod.rs`/`lib.rs` a `use child::...` of one of its rooms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Repository root (the ibscope package).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `root` by its module path (`a/b.rs` and `a/b/mod.rs` are
/// `[a, b]`, `lib.rs` is `[]`); `main.rs` of a crate with a `lib.rs` is left out.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    let has_lib = root.join("lib.rs").exists();
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().with_extension("");
        let mut parts: Module = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match parts.last().map(String::as_str) {
            Some("main") if has_lib => continue,
            Some("mod" | "lib" | "main") => {
                parts.pop();
            }
            _ => {}
        }
        out.insert(parts, f);
    }
    out
}

/// The code of a file: without its test module, its comments and macro-relative paths.
fn code(text: &str) -> String {
    let mut lines = Vec::new();
    let mut test_attr = false;
    for line in text.lines() {
        let t = line.trim_start();
        let module = t.starts_with("mod ") || t.starts_with("pub(crate) mod ");
        if test_attr && module && t.trim_end().ends_with('{') {
            break;
        }
        test_attr = t.starts_with("#[cfg(test)]");
        let without_comment = line.find("//").map_or(line, |i| &line[..i]);
        lines.push(without_comment.replace("$crate::", "$macro::"));
    }
    lines.join("\n")
}

/// The identifier paths that follow each `prefix` in `text` (`crate::a::b::{c, d}` gives
/// `[a, b]`).
fn paths_after(text: &str, prefix: &str) -> Vec<Module> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path: Module = rest[..end]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        out.push(path);
    }
    out
}

/// The longest prefix of `base + path` that is a file.
fn resolve(files: &BTreeMap<Module, PathBuf>, base: &[String], path: &[String]) -> Option<Module> {
    (0..=path.len()).rev().find_map(|k| {
        let mut m = base.to_vec();
        m.extend_from_slice(&path[..k]);
        files.contains_key(&m).then_some(m)
    })
}

/// The files each file imports.
fn imports(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = modules(root);
    let mut out = BTreeMap::new();
    for (m, f) in &files {
        let text = code(&std::fs::read_to_string(f).unwrap());
        let mut deps = BTreeSet::new();
        for p in paths_after(&text, "crate::") {
            deps.extend(resolve(&files, &[], &p));
        }
        let parent = &m[..m.len().saturating_sub(1)];
        for p in paths_after(&text, "super::") {
            deps.extend(resolve(&files, parent, &p));
        }
        let is_dir_module = f
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
        if is_dir_module {
            for line in text.lines() {
                let t = line.trim_start();
                let used = ["use ", "pub use ", "pub(crate) use "]
                    .iter()
                    .find_map(|p| t.strip_prefix(p));
                if let Some(used) = used {
                    let used = used.strip_prefix("self::").unwrap_or(used);
                    if let Some((child, _)) = used.split_once("::") {
                        deps.extend(resolve(&files, m, &[child.to_string()]));
                    }
                }
            }
        }
        deps.remove(m);
        out.insert(m.clone(), deps);
    }
    out
}

/// Pairs of files of the crate under `root` that import each other.
fn cycles(root: &Path) -> Vec<String> {
    let deps = imports(root);
    let name = |m: &Module| {
        if m.is_empty() {
            "<crate root>".to_string()
        } else {
            m.join("/")
        }
    };
    let mut out = Vec::new();
    for (a, ds) in &deps {
        for b in ds {
            if a < b && deps.get(b).is_some_and(|x| x.contains(a)) {
                out.push(format!("{} <-> {}", name(a), name(b)));
            }
        }
    }
    out
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let repo = repo_root();
    let mut found = Vec::new();
    for krate in ["mad/src", "topo/src", "host/src", "src"] {
        for c in cycles(&repo.join(krate)) {
            found.push(format!("{krate}: {c}"));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The scan sees what it is for: a pair of files that import each other, through
/// `crate::`, `super::` and a `mod.rs`'s own `use`, and not through comments, tests or a
/// macro's `$crate::`.
#[test]
fn the_scan_finds_a_planted_cycle_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("room")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(root.join(p), text).unwrap();
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub mod room;\n",
    );
    write("a.rs", "use crate::b::Thing;\n");
    write(
        "b.rs",
        "pub struct Thing;\nfn f() -> crate::a::Other { todo!() }\n",
    );
    write(
        "c.rs",
        "//! see crate::a\nmacro_rules! m { () => { $crate::a::X } }\n\
         #[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n",
    );
    write("room/mod.rs", "mod inner;\npub use inner::Item;\n");
    write("room/inner.rs", "use super::Item;\n");
    let mut found = cycles(root);
    found.sort();
    assert_eq!(found, ["a <-> b", "room <-> room/inner"]);
    // c.rs names a only in a comment, a macro and its tests.
    assert_eq!(imports(root)[&vec!["c".to_string()]], BTreeSet::new());
}

/// A line with its string and character literals emptied and its comment cut, so that
/// braces inside them do not count. `in_string` carries a string literal that runs on
/// past the end of a line into the next one.
fn braces_of(line: &str, in_string: &mut bool) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    loop {
        if *in_string {
            *in_string = !skip_string(&mut chars);
        }
        let Some(c) = chars.next() else { break };
        match c {
            '"' => *in_string = true,
            // A character literal ('{', '\''), not a lifetime ('a).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    let close = chars.clone().skip(1).position(|x| x == '\'');
                    for _ in 0..close.map_or(0, |p| p + 2) {
                        chars.next();
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            c => out.push(c),
        }
    }
    out
}

/// Skip the rest of a string literal; whether its closing quote was on this line.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    while let Some(d) = chars.next() {
        match d {
            '\\' => {
                chars.next();
            }
            '"' => return true,
            _ => {}
        }
    }
    false
}

/// The functions of `text` longer than `limit` lines: (name, first line, length).
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or(t.strip_prefix("pub(super) "))
            .unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let t = t.strip_prefix("unsafe ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            i += 1;
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        let mut in_string = false;
        while j < lines.len() {
            let code = braces_of(lines[j], &mut in_string);
            if !opened && code.contains(';') && !code.contains('{') {
                break; // a declaration without a body
            }
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if opened && depth <= 0 {
                break;
            }
            j += 1;
        }
        let length = j - i + 1;
        if opened && length > limit {
            out.push((name, i + 1, length));
        }
        i = if opened { j + 1 } else { i + 1 };
    }
    out
}

/// CONTRIBUTING.md: no function runs over about 120 lines (the crates' code; tests and
/// benchmarks tell a story step by step and may run longer).
#[test]
fn no_function_runs_over_120_lines() {
    let repo = repo_root();
    let mut found = Vec::new();
    for krate in ["mad/src", "topo/src", "host/src", "src"] {
        for (_, file) in modules(&repo.join(krate)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (name, line, length) in long_functions(&text, 120) {
                let path = file.strip_prefix(&repo).unwrap().display().to_string();
                found.push(format!("{path}:{line}: fn {name}: {length} lines"));
            }
        }
    }
    assert!(found.is_empty(), "long functions:\n{}", found.join("\n"));
}

/// The measure counts a body's lines, braces in strings, characters and comments aside.
#[test]
fn function_length_is_measured_by_its_braces() {
    let body: String = (0..5).map(|_| "    let x = \"}\"; // }\n").collect();
    let text = format!(
        "fn short() {{\n    let c = '{{';\n}}\nfn declared();\npub fn long<'a>(s: &'a str) {{\n{body}}}\n"
    );
    assert_eq!(long_functions(&text, 4), [("long".to_string(), 5, 7)]);
    assert_eq!(long_functions(&text, 7), []);
    // A string over several lines: its braces are text, the function ends where it ends.
    let text = "fn page() {\n    let s = \"a {\n}} b\n{\";\n}\nfn next() {\n}\n";
    assert_eq!(long_functions(text, 3), [("page".to_string(), 1, 5)]);
}
