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
    ("abi", &["fabric", "con"]),
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

/// The `crate::<module>` names used in the code of `module` (comments skipped).
fn uses(src: &Path, module: &str) -> BTreeSet<String> {
    let mut paths = Vec::new();
    files(&src.join(module), &mut paths);
    files(&src.join(format!("{module}.rs")), &mut paths);
    let mut out = BTreeSet::new();
    for p in paths {
        for line in std::fs::read_to_string(&p).unwrap().lines() {
            let code = line.split("//").next().unwrap();
            for (i, _) in code.match_indices("crate::") {
                let name: String =
                    code[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if name != module && !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
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
        graph.insert(*module, used);
    }
    // Every top-level module is in the table (a new one needs its row).
    for e in std::fs::read_dir(&src).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let name = name.trim_end_matches(".rs");
        if !["lib", "bin"].contains(&name) {
            assert!(allowed.contains_key(name), "module {name} has no row in ALLOWED (ARCHITECTURE.md)");
        }
    }
    // No cycle: repeatedly remove modules that use nothing left.
    let mut left: BTreeMap<&str, BTreeSet<String>> = graph;
    while !left.is_empty() {
        let free: Vec<&str> =
            left.iter().filter(|(_, u)| u.iter().all(|x| !left.contains_key(x.as_str()))).map(|(m, _)| *m).collect();
        assert!(!free.is_empty(), "a cycle among {:?}", left.keys().collect::<Vec<_>>());
        for m in free {
            left.remove(m);
        }
    }
}
