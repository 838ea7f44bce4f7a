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

/// A `use` item: the name it brings into its module and the path it names, from the
/// crate root (`None` for a path outside the crate: std, another crate).
#[derive(Debug, Clone)]
struct UseItem {
    /// `None` for a glob (`use a::*`).
    name: Option<String>,
    target: Option<Module>,
}

/// Identifiers, `::`, braces, commas and `*` of a `use` tree's text.
fn use_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut ident = c.to_string();
            while let Some(&d) = chars.peek().filter(|d| d.is_alphanumeric() || **d == '_') {
                ident.push(d);
                chars.next();
            }
            out.push(ident);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push("::".into());
        } else if "{},*".contains(c) {
            out.push(c.to_string());
        }
    }
    out
}

/// The leaves of a use tree (`a::{b, c::d as e, self, *}`) as (path, alias, is_glob).
fn use_leaves(tokens: &[String]) -> Vec<(Vec<String>, Option<String>, bool)> {
    fn tree(
        t: &[String],
        i: &mut usize,
        prefix: &[String],
        out: &mut Vec<(Vec<String>, Option<String>, bool)>,
    ) {
        let mut path = prefix.to_vec();
        while *i < t.len() {
            match t[*i].as_str() {
                "::" => *i += 1,
                "*" => {
                    *i += 1;
                    out.push((path.clone(), None, true));
                    return;
                }
                "{" => {
                    *i += 1;
                    while *i < t.len() && t[*i] != "}" {
                        tree(t, i, &path, out);
                        if *i < t.len() && t[*i] == "," {
                            *i += 1;
                        }
                    }
                    *i += 1;
                    return;
                }
                "," | "}" => break,
                "as" => {
                    *i += 1;
                    let alias = t.get(*i).cloned();
                    *i += 1;
                    out.push((path.clone(), alias, false));
                    return;
                }
                ident => {
                    path.push(ident.to_string());
                    *i += 1;
                }
            }
        }
        if path.len() > prefix.len() {
            out.push((path, None, false));
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        tree(tokens, &mut i, &[], &mut out);
        i += 1;
    }
    out
}

/// The text of each `use` declaration of `code` (any visibility), without `use` and `;`.
fn use_declarations(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].trim_end();
        let starts = before.is_empty()
            || before.ends_with([';', '{', '}', ']'])
            || before.ends_with("pub")
            || before.ends_with(')') && before.rfind("pub(").is_some();
        let ident_before = rest[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[i + 4..];
        if !starts || ident_before {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

/// A path as written in `module` (`crate::a`, `super::a`, `self::a`, a child module's
/// `child::a`, an alias's `alias::a`) made absolute; `None` outside the crate.
fn absolute(
    files: &BTreeMap<Module, PathBuf>,
    module: &[String],
    aliases: &BTreeMap<String, Module>,
    path: &[String],
) -> Option<Module> {
    let (first, rest) = path.split_first()?;
    let mut base: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module[..module.len().saturating_sub(1)].to_vec();
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend_from_slice(rest);
            return Some(base);
        }
        name => {
            let mut child = module.to_vec();
            child.push(name.to_string());
            if files.contains_key(&child) {
                child
            } else {
                aliases.get(name)?.clone()
            }
        }
    };
    base.extend_from_slice(rest);
    Some(base)
}

/// Every file's `use` items, with their paths made absolute.
fn use_items(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, Vec<UseItem>> {
    let mut out = BTreeMap::new();
    for (m, f) in files {
        let text = code(&std::fs::read_to_string(f).unwrap());
        let mut aliases = BTreeMap::new();
        let mut items = Vec::new();
        for decl in use_declarations(&text) {
            for (path, alias, glob) in use_leaves(&use_tokens(&decl)) {
                let mut path = path;
                // `use a::{self}` names `a`.
                if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
                    path.pop();
                }
                let target = absolute(files, m, &aliases, &path);
                let name = (!glob).then(|| alias.or_else(|| path.last().cloned()).unwrap());
                if let (Some(name), Some(target)) = (&name, &target) {
                    aliases.insert(name.clone(), target.clone());
                }
                items.push(UseItem { name, target });
            }
        }
        out.insert(m.clone(), items);
    }
    out
}

/// The files an absolute path names: the file it lies in and, when that file only
/// re-exports the name (`pub use inner::Item`), the file the name comes from, and so on.
fn files_named(
    files: &BTreeMap<Module, PathBuf>,
    uses: &BTreeMap<Module, Vec<UseItem>>,
    path: &[String],
    out: &mut BTreeSet<Module>,
    depth: usize,
) {
    let Some(k) = (0..=path.len())
        .rev()
        .find(|&k| files.contains_key(&path[..k]))
    else {
        return;
    };
    let file = path[..k].to_vec();
    if !out.insert(file.clone()) || depth > 8 {
        return;
    }
    let Some(next) = path.get(k) else { return };
    for item in &uses[&file] {
        if item.name.as_deref() == Some(next.as_str()) {
            if let Some(target) = &item.target {
                let mut onward = target.clone();
                onward.extend_from_slice(&path[k + 1..]);
                files_named(files, uses, &onward, out, depth + 1);
            }
        }
    }
}

/// The paths of `text`: every `a::b::c` not preceded by an identifier character.
fn paths_in(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == b'$')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (is_ident(bytes[i]) || text[i..].starts_with("::")) {
            i += if bytes[i] == b':' { 2 } else { 1 };
        }
        let path: Vec<String> = text[start..i]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if path.len() > 1 {
            out.push(path);
        }
    }
    out
}

/// The files each file imports: the paths its code names, through `crate::`, `super::`,
/// `self::`, its child modules and its aliases (`use crate::x as y;`, `use crate::x;`), and
/// through the re-exports of the files they name; a glob `use a::*` imports `a` and all
/// that `a` itself imports by `use`.
fn imports(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = modules(root);
    let uses = use_items(&files);
    let mut out = BTreeMap::new();
    for (m, f) in &files {
        let text = code(&std::fs::read_to_string(f).unwrap());
        let aliases: BTreeMap<String, Module> = uses[m]
            .iter()
            .filter_map(|u| Some((u.name.clone()?, u.target.clone()?)))
            .collect();
        let mut deps = BTreeSet::new();
        for path in paths_in(&text) {
            if let Some(abs) = absolute(&files, m, &aliases, &path) {
                files_named(&files, &uses, &abs, &mut deps, 0);
            }
        }
        for item in uses[m].iter().filter(|u| u.name.is_none()) {
            let Some(target) = &item.target else { continue };
            let mut named = BTreeSet::new();
            files_named(&files, &uses, target, &mut named, 0);
            for file in named {
                for u in &uses[&file] {
                    if let Some(t) = &u.target {
                        files_named(&files, &uses, t, &mut deps, 0);
                    }
                }
                deps.insert(file);
            }
        }
        deps.remove(m);
        out.insert(m.clone(), deps);
    }
    out
}

/// The import circles of the crate under `root`: two files that import each other
/// (`a <-> b`), or a longer circle (`circle: a, b, c`, its files).
fn cycles(root: &Path) -> Vec<String> {
    let deps = imports(root);
    let name = |m: &Module| {
        if m.is_empty() {
            "<crate root>".to_string()
        } else {
            m.join("/")
        }
    };
    // Strongly connected components by reachability: a file's component is the files it
    // reaches that reach it back (the crates have a few hundred files).
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for d in deps.get(&m).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    stack.push(d.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = deps.keys().map(|m| (m, reach(m))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for (a, from_a) in &reached {
        if placed.contains(*a) || !from_a.contains(*a) {
            continue;
        }
        let circle: Vec<&Module> = from_a.iter().filter(|b| reached[b].contains(*a)).collect();
        placed.extend(circle.iter().map(|m| (*m).clone()));
        let names: Vec<String> = circle.iter().map(|m| name(m)).collect();
        out.push(match names.as_slice() {
            [x, y] => format!("{x} <-> {y}"),
            _ => format!("circle: {}", names.join(", ")),
        });
    }
    out
}

/// The source directory of every crate of the workspace, from the root Cargo.toml's
/// `members` (so a new crate is checked without a change here).
fn crate_sources() -> Vec<(String, PathBuf)> {
    let repo = repo_root();
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo.join("Cargo.toml")).unwrap()).unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    members
        .iter()
        .map(|m| {
            let m = m.as_str().unwrap();
            assert!(!m.contains('*'), "members are listed one by one: {m}");
            let src = repo.join(m).join("src");
            assert!(src.is_dir(), "{m}: no src/");
            (m.to_string(), src)
        })
        .collect()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    let crates = crate_sources();
    assert!(crates.len() >= 5, "the workspace's crates: {crates:?}");
    for (krate, src) in crates {
        for c in cycles(&src) {
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

/// Circles the paths alone do not show: through a module alias (`use crate::x as y;`, and
/// `use crate::x;` then `x::child`), through a parent's re-export, and longer than two.
#[test]
fn the_scan_sees_circles_through_aliases_and_re_exports() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("cmd")).unwrap();
    std::fs::create_dir(root.join("shelf")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(root.join(p), text).unwrap();
    write(
        "lib.rs",
        "pub mod app;\npub mod cmd;\npub mod shelf;\npub mod x;\npub mod y;\npub mod z;\n",
    );
    // app -> cmd/man through `use crate::cmd;`, man -> app by its path.
    write("app.rs", "use crate::cmd;\nfn f() { cmd::man::run(); }\n");
    write("cmd/mod.rs", "pub mod man;\n");
    write("cmd/man.rs", "pub fn run() { crate::app::g(); }\n");
    // x -> y through an alias; y -> shelf/book through shelf's re-export; book -> x.
    write("x.rs", "use crate::y as why;\nfn f() { why::f(); }\n");
    write("y.rs", "use crate::shelf::Book;\npub fn f() {}\n");
    write("shelf/mod.rs", "mod book;\npub use book::Book;\n");
    write(
        "shelf/book.rs",
        "pub struct Book;\nfn f() { crate::x::f(); }\n",
    );
    // z imports only what it names: no circle.
    write("z.rs", "use crate::cmd::man as m;\n");
    let mut found = cycles(root);
    found.sort();
    assert_eq!(
        found,
        ["app <-> cmd/man", "circle: shelf, shelf/book, x, y"]
    );
    let y = imports(root)[&vec!["y".to_string()]].clone();
    assert!(
        y.contains(&vec!["shelf".to_string(), "book".to_string()]),
        "{y:?}"
    );
}

/// No source file runs over 1,000 lines outside its `#[cfg(test)]` module: a file that
/// grows past it holds more than one thing.
#[test]
fn no_source_file_is_over_1000_lines_outside_its_tests() {
    let repo = repo_root();
    let mut found = Vec::new();
    for (_, src) in crate_sources() {
        for file in modules(&src).into_values().chain([src.join("main.rs")]) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let lines = code(&text).lines().count();
            if lines > 1000 {
                let path = file.strip_prefix(&repo).unwrap().display().to_string();
                found.push(format!("{path}: {lines} lines"));
            }
        }
    }
    found.dedup();
    assert!(
        found.is_empty(),
        "files over 1,000 lines:\n{}",
        found.join("\n")
    );
}

/// Function length is clippy's `too_many_lines` (clippy.toml sets the limit): every crate
/// takes the workspace's lints, so none goes unchecked.
#[test]
fn every_crate_takes_the_workspace_lints() {
    let repo = repo_root();
    let root: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo.join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(
        root["workspace"]["lints"]["clippy"]["too_many_lines"].as_str(),
        Some("warn")
    );
    let clippy = std::fs::read_to_string(repo.join("clippy.toml")).unwrap();
    assert!(
        clippy.contains("too-many-lines-threshold = 120"),
        "{clippy}"
    );
    let mut missing = Vec::new();
    for (krate, src) in crate_sources() {
        let manifest: toml::Table = toml::from_str(
            &std::fs::read_to_string(src.parent().unwrap().join("Cargo.toml")).unwrap(),
        )
        .unwrap();
        let lints = manifest.get("lints").and_then(|l| l.get("workspace"));
        if lints.and_then(toml::Value::as_bool) != Some(true) {
            missing.push(krate);
        }
    }
    assert!(
        missing.is_empty(),
        "without `[lints] workspace = true`: {missing:?}"
    );
}

/// Each crate's integration tests are one binary (linking is much of a test build): the
/// package's own `tests/it/` beside this file, and at most one in every other crate.
#[test]
fn each_crate_s_integration_tests_are_one_binary() {
    let repo = repo_root();
    let mut found = Vec::new();
    for (krate, src) in crate_sources() {
        let tests = src.parent().unwrap().join("tests");
        let Ok(entries) = std::fs::read_dir(&tests) else {
            continue;
        };
        let mut binaries: Vec<String> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs") || p.join("main.rs").is_file())
            .map(|p| p.strip_prefix(&repo).unwrap().display().to_string())
            .collect();
        binaries.sort();
        let expected = match krate.as_str() {
            "." => vec!["tests/it".to_string(), "tests/layering.rs".to_string()],
            _ if binaries.len() <= 1 => binaries.clone(),
            _ => Vec::new(),
        };
        if binaries != expected {
            found.push(format!("{krate}: {binaries:?}"));
        }
    }
    assert!(found.is_empty(), "test binaries: {}", found.join("; "));
}
