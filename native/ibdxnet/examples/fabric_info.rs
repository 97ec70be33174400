//! Prints the fabric `auto` selects and its device limits.
//!
//! `cargo run --example fabric_info` (set `IBDXNET_FABRIC=sim|verbs` to choose).

use ibdxnet::fabric::sim::SimFabric;
use ibdxnet::fabric::verbs::{self, VerbsFabric};
use ibdxnet::fabric::{Fabric, FabricConfig, FabricKind};

fn main() {
    let kind = match FabricKind::Auto.resolve() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    println!("RDMA devices on this host: {:?}", verbs::device_names().unwrap_or_default());
    println!("selected fabric: {}", kind.name());
    let cfg = FabricConfig::default();
    let info = match kind {
        FabricKind::Verbs => VerbsFabric::open(&cfg).map(|f| f.info().clone()),
        _ => SimFabric::open(&cfg).map(|f| f.info().clone()),
    };
    match info {
        Ok(i) => println!("{i:#?}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
