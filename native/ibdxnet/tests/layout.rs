//! The shared-struct layout table agrees with the compiler and with a C
//! compiler reading the generated header.

use std::path::{Path, PathBuf};
use std::process::Command;

use ibdxnet::abi::{layout_of, layouts, IbdxnetDeviceInfo};

#[test]
fn table_is_consistent() {
    for l in layouts() {
        let mut end = 0;
        for f in l.fields {
            assert!(f.offset >= end, "{}.{} overlaps the field before", l.name, f.name);
            assert_eq!(f.offset % f.size.clamp(1, 8), 0, "{}.{} misaligned", l.name, f.name);
            end = f.offset + f.size;
        }
        assert!(end <= l.size && l.size % l.align == 0, "{}", l.name);
        assert_eq!(l.size - end, 0, "{} has tail padding: pad explicitly so Java and C agree", l.name);
    }
}

#[test]
fn device_info_matches_documented_diagram() {
    let l = layout_of("IbdxnetDeviceInfo").unwrap();
    let off = |n: &str| l.fields.iter().find(|f| f.name == n).unwrap().offset;
    assert_eq!(
        (l.size, off("lid"), off("port"), off("link_layer"), off("gid"), off("sim_addr")),
        (64, 28, 30, 31, 32, 48)
    );
    assert_eq!(std::mem::size_of::<IbdxnetDeviceInfo>(), 64);
}

fn header() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include/ibdxnet.h")
}

#[test]
fn c_compiler_sees_the_same_layout() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layout-c");
    std::fs::create_dir_all(&dir).unwrap();
    let mut src = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"ibdxnet.h\"\nint main(void) {\n");
    let mut expected = String::new();
    for l in layouts() {
        src += &format!("  printf(\"{0} %zu %zu\\n\", sizeof(struct {0}), _Alignof(struct {0}));\n", l.name);
        expected += &format!("{} {} {}\n", l.name, l.size, l.align);
        for f in l.fields {
            src += &format!(
                "  printf(\"{0}.{1} %zu %zu\\n\", offsetof(struct {0}, {1}), sizeof(((struct {0}*)0)->{1}));\n",
                l.name, f.name
            );
            expected += &format!("{}.{} {} {}\n", l.name, f.name, f.offset, f.size);
        }
    }
    src += "  return 0;\n}\n";
    let c = dir.join("layout.c");
    std::fs::write(&c, src).unwrap();
    let exe = dir.join("layout");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(header().parent().unwrap())
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(out.status.success(), "header does not compile:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert_eq!(String::from_utf8(run.stdout).unwrap(), expected);
}

#[test]
fn header_declares_every_shared_struct() {
    let h = std::fs::read_to_string(header()).unwrap();
    for l in layouts() {
        assert!(h.contains(&format!("struct {} {{", l.name)), "{} missing from ibdxnet.h", l.name);
    }
}
