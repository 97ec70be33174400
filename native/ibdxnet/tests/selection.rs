//! `auto` fabric selection and the `IBDXNET_FABRIC` override. One test: the
//! environment is process-wide.

use ibdxnet::fabric::verbs::device_names;
use ibdxnet::fabric::{FabricKind, FabricKindError, ENV_FABRIC};

#[test]
fn auto_selection_and_environment_override() {
    std::env::remove_var(ENV_FABRIC);
    let has_device = !device_names().unwrap().is_empty();
    let auto = FabricKind::Auto.resolve().unwrap();
    assert_eq!(auto, if has_device { FabricKind::Verbs } else { FabricKind::Sim });
    assert_eq!(FabricKind::Sim.resolve().unwrap(), FabricKind::Sim);
    assert_eq!(FabricKind::Verbs.resolve().unwrap(), FabricKind::Verbs);

    std::env::set_var(ENV_FABRIC, "sim");
    assert_eq!(FabricKind::Verbs.resolve().unwrap(), FabricKind::Sim, "environment wins over configuration");
    std::env::set_var(ENV_FABRIC, "VERBS");
    assert_eq!(FabricKind::Sim.resolve().unwrap(), FabricKind::Verbs);
    std::env::set_var(ENV_FABRIC, "infiniband-please");
    let e = FabricKind::Auto.resolve().unwrap_err();
    assert_eq!(e, FabricKindError::Environment("infiniband-please".into()));
    let e = e.to_string();
    assert!(e.contains(ENV_FABRIC) && e.contains("infiniband-please"), "{e}");
    std::env::set_var(ENV_FABRIC, "");
    assert_eq!(FabricKind::Sim.resolve().unwrap(), FabricKind::Sim, "empty means unset");
    std::env::remove_var(ENV_FABRIC);

    let kinds = [
        ("auto", FabricKind::Auto),
        ("sim", FabricKind::Sim),
        ("verbs", FabricKind::Verbs),
        ("simhost", FabricKind::SimHost),
    ];
    for (s, k) in kinds {
        assert_eq!(FabricKind::parse(s).unwrap(), k);
        assert_eq!(k.name(), s);
    }
    let e = FabricKind::parse(" InfiniBand ").unwrap_err();
    assert_eq!(e.to_string(), "unknown fabric 'infiniband' (expected auto, verbs, sim or simhost)");
}
