use super::*;

fn cfg() -> EngineConfig {
    EngineConfig::new(NodeId(1), "127.0.0.1:5730".parse().unwrap())
}

#[test]
fn defaults_are_valid_and_follow_table_2() {
    let c = cfg();
    c.validate().unwrap();
    assert_eq!(
        (c.sq_size, c.srq_size, c.recv_buffer_size, c.recv_sges_per_wr, c.max_connections),
        (20, 2000, 32768, 4, 100)
    );
    assert_eq!(c.parking, ParkingConfig::default(), "the table and ParkingConfig agree on the paper's values");
}

#[test]
fn every_default_parses_and_is_its_own_text_form() {
    let c = cfg();
    for k in KEYS {
        let mut d = cfg();
        (k.set)(&mut d, k.default).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        if k.name != "node_id" && k.name != "listen" {
            assert_eq!((k.get)(&c), k.default, "{}: the text form of the default", k.name);
        }
    }
}

#[test]
fn each_bad_field_is_named() {
    type Change = Box<dyn Fn(&mut EngineConfig)>;
    let cases: Vec<(&str, Change)> = vec![
        ("node_id", Box::new(|c| c.node_id = NodeId::INVALID)),
        ("send_ring_size", Box::new(|c| c.send_ring_size = 5000)),
        ("sq_size", Box::new(|c| c.sq_size = 0)),
        ("recv_buffer_count", Box::new(|c| c.recv_buffer_count = 100)),
        ("incoming_ring_size", Box::new(|c| c.incoming_ring_size = 3)),
        ("signal_interval", Box::new(|c| c.signal_interval = 21)),
        ("recv_sges_per_wr", Box::new(|c| c.recv_sges_per_wr = 33)),
        ("max_connections", Box::new(|c| c.max_connections = 0)),
    ];
    for (field, change) in cases {
        let mut c = cfg();
        change(&mut c);
        let e = c.validate().unwrap_err();
        assert!(matches!(e, ConfigError::OutOfRange { .. } | ConfigError::Conflict { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

/// Each ranged key: one below and one above its range is refused naming
/// the key and the value, from a file and from the Java path.
#[test]
fn every_range_is_checked_naming_key_and_value() {
    for k in KEYS {
        let (min, max) = match k.range {
            Range::Any => continue,
            Range::Int(min, max) | Range::Pow2(min, max) => (min, max),
        };
        let below = min.checked_sub(1).map(|v| v.to_string());
        for bad in below.into_iter().chain([(max + 1).to_string()]) {
            let text = format!("{}={bad}\n", k.name);
            let e = cfg().apply_text(&text).expect_err(&text).to_string();
            assert!(e.contains(k.name) && e.contains(&bad), "{text}: {e}");
            let e = cfg().apply_keys(&text, "native.").expect_err(&text).to_string();
            assert!(e.contains(&format!("native.{}", k.name)) && e.contains(&bad), "{text}: {e}");
            assert!(!e.starts_with("line"), "{e}");
        }
    }
}

#[test]
fn start_nodes_are_parsed_and_bad_ones_named() {
    let mut c = cfg();
    c.apply_text("node.3=127.0.0.1:7000\nnode.4=127.0.0.1:7001\nnode.3=127.0.0.1:7002\n").unwrap();
    let want: Vec<(NodeId, std::net::SocketAddr)> =
        vec![(NodeId(4), "127.0.0.1:7001".parse().unwrap()), (NodeId(3), "127.0.0.1:7002".parse().unwrap())];
    assert_eq!(c.nodes, want, "the last entry of an id wins");
    let e = cfg().apply_text("node.65535=127.0.0.1:7000").unwrap_err().to_string();
    assert!(e.contains("node.65535") && e.contains("is not a node id"), "{e}");
    let e = cfg().apply_text("\nnode.2=nowhere").unwrap_err();
    assert!(
        matches!(&e, ConfigError::Line { line: 2, source }
            if matches!(**source, ConfigError::BadValue { reason: ValueError::Address(_), .. })),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(e.starts_with("line 2: node.2 = 'nowhere': ") && e.contains("host:port"), "{e}");
}

#[test]
fn text_round_trips_and_errors_name_the_line_and_key() {
    let mut c = EngineConfig::new(NodeId(4), "127.0.0.1:5730".parse().unwrap());
    c.sq_size = 33;
    c.device.gid_index = Some(1);
    let mut d = EngineConfig::new(NodeId(0), "0.0.0.0:1".parse().unwrap());
    d.apply_text(&c.to_text()).unwrap();
    assert_eq!(d.to_text(), c.to_text());
    assert_eq!(c.to_text().lines().count(), KEYS.len());
    let e = d.apply_text("# comment\n\nsq_size=abc\n").unwrap_err().to_string();
    assert!(e.starts_with("line 3: sq_size = 'abc': not a non-negative integer"), "{e}");
    assert!(d.apply_text("bogus=1").unwrap_err().to_string().contains("unknown configuration key 'bogus'"));
    assert!(d.apply_text("node_id=65535").unwrap_err().to_string().contains("node_id = '65535'"));
    let e = d.apply_text("sq_size=0").unwrap_err();
    assert!(e.to_string().contains("sq_size = 0"), "validated after applying: {e}");
    assert!(matches!(e, ConfigError::OutOfRange { value: 0, range: Range::Int(1, _), .. }), "{e:?}");
    let e = d.apply_text("sq_size 3").unwrap_err().to_string();
    assert_eq!(e, "line 1: 'sq_size 3' is not key=value");
}

/// From Java the lines are built by the program: an error names the key
/// as the user wrote it there (`native.<key>`), never a line.
#[test]
fn errors_from_the_java_path_name_the_native_key_without_a_line() {
    let e = cfg().apply_keys("node_id=1\nsq_size=abc\n", "native.").unwrap_err().to_string();
    assert_eq!(e, "native.sq_size = 'abc': not a non-negative integer (invalid digit found in string)");
    let e = cfg().apply_keys("sq_size=8\nsignal_interval=9\n", "native.").unwrap_err();
    assert!(
        matches!(&e, ConfigError::Conflict { conflict, .. }
            if *conflict == Conflict::SignalInterval { signal_interval: 9, sq_size: 8 }),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "native.signal_interval = 9 must be at most native.sq_size = 8");
    let e = cfg().apply_keys("sq_sise=8\n", "native.").unwrap_err();
    assert!(matches!(&e, ConfigError::UnknownKey { suggestion: Some(s), .. } if s == "native.sq_size"), "{e:?}");
    assert_eq!(e.to_string(), "unknown configuration key 'native.sq_sise' (did you mean 'native.sq_size'?)");
    let e = cfg().apply_keys("sq_size\n", "native.").unwrap_err().to_string();
    assert_eq!(e, "'native.sq_size' is not key=value");
    let e = cfg().apply_text("parking_yield_after=0").unwrap_err().to_string();
    assert!(e.ends_with("(did you mean 'parking_yield_after_ms'?)"), "{e}");
    assert!(!cfg().apply_text("zzz=1").unwrap_err().to_string().contains("did you mean"));
}

/// `pin_threads`: good values set the threads' CPUs and come back as
/// text; bad ones are refused naming the key, the value and what is wrong,
/// from a file (with the line) and from Java (`native.pin_threads`).
#[test]
fn pin_threads_is_parsed_and_bad_values_are_named() {
    assert_eq!(cfg().pin_threads, ThreadPins::default(), "off by default");
    let mut c = cfg();
    c.apply_text("pin_threads = recv=1, send=0\n").unwrap();
    assert_eq!(c.pin_threads, ThreadPins { send: Some(0), recv: Some(1), job: None });
    assert!(c.to_text().contains("\npin_threads=send=0,recv=1\n"), "{}", c.to_text());
    c.apply_keys("pin_threads=job=0\n", "native.").unwrap();
    assert_eq!(c.pin_threads, ThreadPins { send: None, recv: None, job: Some(0) }, "the value replaces the old one");
    c.set("pin_threads", "").unwrap();
    assert_eq!(c.pin_threads, ThreadPins::default());
    let max = crate::sys::affinity::MAX_CPU;
    for (value, why) in [
        ("0,1", "'0' is not thread=cpu (e.g. send=0,recv=1)".to_string()),
        ("send=0,worker=1", "unknown thread 'worker' (expected send, recv or job)".to_string()),
        ("send=zero", format!("send: 'zero' is not a CPU number in [0, {max}]")),
        ("recv=99999", format!("recv: '99999' is not a CPU number in [0, {max}]")),
        ("send=0,send=1", "send is pinned twice".to_string()),
    ] {
        let e = cfg().apply_text(&format!("pin_threads={value}")).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Line { source, .. }
                if matches!(**source, ConfigError::BadValue { reason: ValueError::Pins(_), .. })),
            "{e:?}"
        );
        assert_eq!(e.to_string(), format!("line 1: pin_threads = '{value}': {why}"));
        let e = cfg().apply_keys(&format!("pin_threads={value}"), "native.").unwrap_err().to_string();
        assert_eq!(e, format!("native.pin_threads = '{value}': {why}"));
    }
}

/// A CPU the starting thread may not run on is refused by the start's
/// check, naming the key, the thread, the CPU and the CPUs there are.
#[test]
fn pinning_to_a_cpu_this_thread_may_not_use_is_refused() {
    let allowed = crate::sys::affinity::allowed_cpus().unwrap();
    let mut c = cfg();
    c.pin_threads = ThreadPins { send: allowed.first().copied(), recv: allowed.last().copied(), job: None };
    c.check_pins().unwrap();
    let absent = (0..=crate::sys::affinity::MAX_CPU).find(|cpu| !allowed.contains(cpu)).unwrap();
    c.pin_threads.recv = Some(absent);
    let e = c.check_pins().unwrap_err();
    assert!(matches!(e, ConfigError::PinnedCpu { thread: "recv", cpu, .. } if cpu == absent), "{e:?}");
    let e = e.to_string();
    let list = crate::sys::affinity::list_text(&allowed);
    assert_eq!(
        e,
        format!(
            "pin_threads: recv={absent}: CPU {absent} is not one the starting thread may run on (it may run on {list})"
        )
    );
}

/// docs/configuration.md's engine table is [`markdown_table`]; with
/// `IBDXNET_UPDATE_README=1` this test rewrites it instead of failing.
#[test]
fn docs_table_is_generated_from_keys() {
    crate::util::check_doc_section(
        "docs/configuration.md",
        "native-config-keys",
        &markdown_table(),
        "engine configuration table (KEYS)",
    );
}

/// The statistics keys: `stats_timers` takes only `true` or `false`,
/// `stats_print_interval_ms` is off by default and bounded like the
/// other intervals; both reach their fields and the text form.
#[test]
fn statistics_keys_parse_and_are_checked() {
    let mut c = cfg();
    assert!(!c.stats_timers, "timers off by default (their cost, bench/HISTORY.md)");
    assert_eq!(c.stats_print_interval, Duration::ZERO, "no print thread by default");
    c.apply_text("stats_timers = true\nstats_print_interval_ms = 1500\n").unwrap();
    assert!(c.stats_timers);
    assert_eq!(c.stats_print_interval, Duration::from_millis(1500));
    assert!(c.to_text().contains("stats_timers=true\n"), "{}", c.to_text());
    assert!(c.to_text().contains("stats_print_interval_ms=1500\n"), "{}", c.to_text());
    for bad in ["yes", "1", "True", ""] {
        let e = cfg().apply_keys(&format!("stats_timers={bad}"), "native.").unwrap_err();
        assert!(matches!(e, ConfigError::BadValue { reason: ValueError::NotBool, .. }), "{bad}: {e:?}");
        assert_eq!(e.to_string(), format!("native.stats_timers = '{bad}': not `true` or `false`"));
    }
    let mut c = cfg();
    c.set("stats_print_interval_ms", &(MAX_INTERVAL_MS + 1).to_string()).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("stats_print_interval_ms") && e.contains(&(MAX_INTERVAL_MS + 1).to_string()), "{e}");
    assert!(cfg().set("stats_print_interval_ms", "-1").is_err());
}

#[test]
fn engine_threads_is_parsed_and_bad_values_are_named() {
    assert_eq!(cfg().engine_threads, EngineThreads::Dedicated, "dedicated by default");
    let mut c = cfg();
    c.apply_text("engine_threads = shared\n").unwrap();
    assert_eq!(c.engine_threads, EngineThreads::Shared);
    assert!(c.to_text().contains("\nengine_threads=shared\n"), "{}", c.to_text());
    c.set("engine_threads", "dedicated").unwrap();
    assert_eq!(c.engine_threads, EngineThreads::Dedicated);
    for value in ["both", "Shared", "1", ""] {
        let e = cfg().apply_keys(&format!("engine_threads={value}"), "native.").unwrap_err().to_string();
        assert_eq!(e, format!("native.engine_threads = '{value}': not `dedicated` or `shared`"));
    }
    // The shared thread takes the send thread's pin.
    let pins = ThreadPins { send: Some(3), recv: Some(4), job: None };
    assert_eq!(pins.cpu(crate::msgrc::ThreadRole::Shared), Some(3));
}

#[test]
fn fabric_config_defaults_agree_with_the_key_table() {
    let d = FabricConfig::default();
    let c = cfg();
    assert_eq!((c.device.ack_timeout, c.device.retry_count), (d.ack_timeout, d.retry_count));
    assert_eq!((d.ack_timeout, d.retry_count), (16, 6), "≈ 268 ms per try, 1 + 6 tries");
}

#[test]
fn qp_retry_count_above_seven_is_refused() {
    let e = cfg().apply_keys("qp_retry_count=8", "native.").unwrap_err().to_string();
    assert!(e.contains("qp_retry_count"), "{e}");
}
