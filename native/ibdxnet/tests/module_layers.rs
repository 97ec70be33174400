//! The crate's modules use only the modules below them (ARCHITECTURE.md,
//! "Native (Rust), bottom first"): every `crate::<module>` in code (not in
//! comments) of one top-level module must be an allowed arrow, and the
//! arrows must not form a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules it may use (ARCHITECTURE.md's table).
const ALLOWED: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("fabric", &["util"]),
    ("sys", &["fabric", "util"]),
    ("con", &["fabric", "sys", "util"]),
    ("abi", &["fabric", "con", "sys"]),
    ("msgrc", &["con", "abi", "fabric", "sys", "util"]),
    ("driver", &["msgrc", "con", "abi", "fabric", "sys", "util"]),
    ("loopback", &["driver", "msgrc", "con", "abi", "fabric", "sys", "util"]),
    ("jni", &["loopback", "driver", "msgrc", "con", "abi", "fabric", "sys", "util"]),
];

fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            files(&e.unwrap().path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The module path of a source file: `con/manager/exchange.rs` →
/// `[con, manager, exchange]`, `con/mod.rs` → `[con]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if m.last().is_some_and(|l| l == "mod" || l == "lib") {
        m.pop();
    }
    m
}

/// A file's code: line comments dropped, the test module (from the first
/// `#[cfg(test)]` on) cut off.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap();
    text.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Parses the path at `b[i..]` (segments joined by `::`, groups `{a, b::c}`
/// expanded) into `out`, each path prefixed by `prefix`; returns the end.
fn parse_path(b: &[u8], i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = prefix;
    let mut i = skip_ws(b, i);
    loop {
        if i < b.len() && b[i] == b'{' {
            i += 1;
            loop {
                i = skip_ws(b, i);
                if i < b.len() && b[i] == b'}' {
                    return i + 1;
                }
                i = skip_ws(b, parse_path(b, i, segs.clone(), out));
                if i < b.len() && b[i] == b',' {
                    i += 1;
                } else {
                    return (i + 1).min(b.len()); // the closing brace
                }
            }
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'*') {
            i += 1;
        }
        if start == i {
            break;
        }
        segs.push(String::from_utf8_lossy(&b[start..i]).into_owned());
        let j = skip_ws(b, i);
        if b[j..].starts_with(b"::") {
            i = skip_ws(b, j + 2);
        } else {
            break;
        }
    }
    out.push(segs);
    i
}

/// Every path in `code` that starts with `crate::`, `super::` or `self::`,
/// resolved against the file's module `me` to a path from the crate root.
fn paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut raw = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        let rest = &b[i..];
        if word_start && (rest.starts_with(b"crate::") || rest.starts_with(b"super::") || rest.starts_with(b"self::")) {
            i = parse_path(b, i, Vec::new(), &mut raw).max(i + 1);
        } else {
            i += 1;
        }
    }
    raw.into_iter()
        .map(|segs| {
            let mut at: Vec<String> = me.to_vec();
            let mut out = Vec::new();
            for (k, s) in segs.iter().enumerate() {
                match (k, s.as_str()) {
                    (0, "crate") => at.clear(),
                    (0, "self") => {}
                    (_, "super") if out.is_empty() => {
                        at.pop();
                    }
                    _ => out.push(s.clone()),
                }
            }
            at.extend(out);
            at
        })
        .collect()
}

/// Per file of top-level module `module`: its module path and the paths it uses.
fn uses_by_file(src: &Path, module: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let mut files_of = Vec::new();
    files(&src.join(module), &mut files_of);
    files(&src.join(format!("{module}.rs")), &mut files_of);
    files_of
        .iter()
        .map(|f| {
            let me = module_of(src, f);
            let used = paths(&code_of(f), &me);
            (me, used)
        })
        .collect()
}

/// The top-level modules used by the code of `module`.
fn uses(src: &Path, module: &str) -> BTreeSet<String> {
    let tops: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    uses_by_file(src, module)
        .into_iter()
        .flat_map(|(_, used)| used)
        .filter_map(|p| p.first().cloned())
        .filter(|top| top != module && tops.contains(top.as_str()))
        .collect()
}

/// Names of the members of a cycle in `graph`, if any (nodes that use
/// nothing left are removed until none is left or none can be).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    let mut left = graph.clone();
    while !left.is_empty() {
        let free: Vec<String> =
            left.iter().filter(|(_, u)| u.iter().all(|x| !left.contains_key(x))).map(|(m, _)| m.clone()).collect();
        if free.is_empty() {
            return Some(left.keys().cloned().collect());
        }
        for m in free {
            left.remove(&m);
        }
    }
    None
}

#[test]
fn modules_use_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut graph = BTreeMap::new();
    for (module, may) in ALLOWED {
        let used = uses(&src, module);
        for u in &used {
            assert!(may.contains(&u.as_str()), "{module} uses crate::{u}, which ARCHITECTURE.md does not allow");
        }
        graph.insert(module.to_string(), used);
    }
    // Every top-level module is in the table (a new one needs its row).
    for e in std::fs::read_dir(&src).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let name = name.trim_end_matches(".rs");
        if !["lib", "bin"].contains(&name) {
            assert!(allowed.contains_key(name), "module {name} has no row in ALLOWED (ARCHITECTURE.md)");
        }
    }
    assert_eq!(cycle(&graph), None, "a cycle among the top-level modules");
}

/// Inside a top-level module, its second-level parts (`msgrc::send`,
/// `con::manager`, …) use each other without a cycle.
#[test]
fn parts_of_a_module_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (module, _) in ALLOWED {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (me, used) in uses_by_file(&src, module) {
            let Some(part) = me.get(1) else { continue };
            let targets = graph.entry(part.clone()).or_default();
            for p in used {
                let (Some(top), Some(t)) = (p.first(), p.get(1)) else { continue };
                let is_part = src.join(module).join(t).is_dir() || src.join(module).join(format!("{t}.rs")).is_file();
                if top == module && t != part && is_part {
                    targets.insert(t.clone());
                }
            }
        }
        assert_eq!(cycle(&graph), None, "a cycle among the parts of {module}: {graph:?}");
    }
}

/// The parser sees what a line-based search misses: grouped imports, nested
/// groups, `super::` and `self::` paths.
#[test]
fn grouped_and_relative_paths_are_resolved() {
    let me: Vec<String> = ["con", "manager", "exchange"].iter().map(|s| s.to_string()).collect();
    let code = "use crate::{fabric::Fabric, sys::{doorbell::Doorbell, queue}};\n\
                use super::super::auth::Auth; let x = self::y::z(); use super::wire;";
    let got: Vec<String> = paths(code, &me).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        [
            "fabric::Fabric",
            "sys::doorbell::Doorbell",
            "sys::queue",
            "con::auth::Auth",
            "con::manager::exchange::y::z",
            "con::manager::wire",
        ]
    );
}
