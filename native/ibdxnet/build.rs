//! Generates `include/ibdxnet.h` (the structs shared with C and Java) with
//! cbindgen, and takes the native ABI number from the repository's
//! `gradle.properties` (whose version must equal the crate's).

use std::path::{Path, PathBuf};

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    native_abi(&crate_dir.join("../../gradle.properties"));
    println!("cargo:rerun-if-changed=src/abi");
    println!("cargo:rerun-if-changed=src/fabric/types.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let header = crate_dir.join("include").join("ibdxnet.h");
    match cbindgen::Builder::new().with_crate(&crate_dir).with_config(config).generate() {
        Ok(bindings) => {
            bindings.write_to_file(&header);
        }
        Err(e) => panic!("cbindgen failed to generate {}: {e}", header.display()),
    }
}

/// Reads `version` and `nativeAbi` from `gradle.properties`: the version must
/// be the crate's, the ABI number goes into the library (`IBDXNET_NATIVE_ABI`).
fn native_abi(props: &Path) {
    println!("cargo:rerun-if-changed={}", props.display());
    let text = std::fs::read_to_string(props).unwrap_or_else(|e| panic!("{}: {e}", props.display()));
    let get = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| panic!("{}: no {key}=", props.display()))
    };
    let crate_version = std::env::var("CARGO_PKG_VERSION").expect("CARGO_PKG_VERSION");
    let version = get("version");
    if version != crate_version {
        panic!(
            "{}: version={version}, but native/ibdxnet/Cargo.toml has version = \"{crate_version}\"; make them equal",
            props.display()
        );
    }
    let abi = get("nativeAbi");
    if abi.parse::<u32>().is_err() {
        panic!("{}: nativeAbi={abi} is not a number", props.display());
    }
    println!("cargo:rustc-env=IBDXNET_NATIVE_ABI={abi}");
}
