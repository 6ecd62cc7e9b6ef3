//! The loader on real objects: xdp-tools' xdp-filter programs as Debian
//! installs them, and the kernel's verifier as a second opinion on the
//! linked instructions.

use pfil_xdp::{kernel, Engine, MapOrigin, MapType, Object, XdpProgram};

const BPF_DIR: &str = "/usr/lib/x86_64-linux-gnu/bpf";
const XDPFILT: [&str; 10] = [
    "xdpfilt_alw_all",
    "xdpfilt_alw_eth",
    "xdpfilt_alw_ip",
    "xdpfilt_alw_tcp",
    "xdpfilt_alw_udp",
    "xdpfilt_dny_all",
    "xdpfilt_dny_eth",
    "xdpfilt_dny_ip",
    "xdpfilt_dny_tcp",
    "xdpfilt_dny_udp",
];

fn read(name: &str) -> Option<Vec<u8>> {
    let path = format!("{BPF_DIR}/{name}.o");
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{path}: {e} (scripts/setup.sh installs xdp-tools)"
            );
            eprintln!("skipped: {path}: {e} (install xdp-tools)");
            None
        }
    }
}

/// What building the `xdp` hook of `config` for `workers` workers says
/// when it refuses (a panic when it builds).
fn refused(config: &str, workers: usize) -> String {
    match pfil_xdp::XdpFilter::from_config(config, workers) {
        Ok(_) => panic!("{config}: built"),
        Err(e) => e,
    }
}

#[test]
fn xdp_filter_objects_parse_with_their_btf_maps() {
    for name in XDPFILT {
        let Some(bytes) = read(name) else { return };
        let obj = Object::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(obj.license, "GPL", "{name}");
        let prog = obj.program(None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(prog.section, "xdp");
        let stats = obj
            .maps
            .iter()
            .find(|m| m.name == "xdp_stats_map")
            .expect("xdp_stats_map");
        assert_eq!(
            (stats.kind, stats.key_size, stats.origin.clone()),
            (MapType::PercpuArray, 4, MapOrigin::Btf)
        );
        if name.ends_with("udp") || name.ends_with("tcp") {
            let ports = obj
                .maps
                .iter()
                .find(|m| m.name == "filter_ports")
                .expect("filter_ports");
            assert_eq!(
                (ports.kind, ports.key_size, ports.max_entries),
                (MapType::PercpuArray, 4, 65536),
                "{name}"
            );
        }
        if name.ends_with("all") {
            for m in [
                "filter_ports",
                "filter_ipv4",
                "filter_ipv6",
                "filter_ethernet",
            ] {
                assert!(obj.maps.iter().any(|d| d.name == m), "{name}: no {m}");
            }
        }
    }
}

#[test]
fn xdp_filter_objects_pass_the_kernel_verifier_as_linked() {
    if !kernel::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "bpf(2) unavailable under CI (needs root)"
        );
        eprintln!("skipped: bpf(2) needs root");
        return;
    }
    for name in XDPFILT {
        let Some(bytes) = read(name) else { return };
        let obj = Object::parse(&bytes).unwrap();
        let prog = obj.program(None).unwrap();
        let k = kernel::KernelProgram::load(&obj, prog).unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = k.test_run(&[0u8; 64]).unwrap();
        assert!(run.action <= 4, "{name}: action {}", run.action);
    }
}

#[test]
fn garbage_and_truncated_objects_are_errors_not_panics() {
    let Some(bytes) = read("xdpfilt_dny_all") else {
        return;
    };
    for cut in (0..bytes.len()).step_by(97) {
        let _ = Object::parse(&bytes[..cut]);
    }
    let mut flipped = bytes.clone();
    let mut x: u32 = 12345;
    for _ in 0..2000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let i = (x as usize >> 4) % flipped.len();
        flipped[i] ^= (x >> 24) as u8 | 1;
        let _ = Object::parse(&flipped);
    }
    assert!(Object::parse(b"not an elf").is_err());
}

mod clang;

#[test]
fn features_object_links_maps_global_data_and_subprograms() {
    let Some(path) = clang::compile("features") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let obj = Object::parse(&bytes).unwrap();
    assert_eq!(obj.license, "Dual MIT/GPL");
    let names: Vec<(&str, MapType, MapOrigin)> = obj
        .maps
        .iter()
        .map(|m| (m.name.as_str(), m.kind, m.origin.clone()))
        .collect();
    for want in [
        ("legacy_counts", MapType::Array, MapOrigin::Legacy),
        ("hash", MapType::Hash, MapOrigin::Btf),
        ("lru", MapType::LruHash, MapOrigin::Btf),
        ("pchash", MapType::PercpuHash, MapOrigin::Btf),
        ("lpm", MapType::LpmTrie, MapOrigin::Btf),
        ("ports", MapType::Devmap, MapOrigin::Btf),
        (".data", MapType::Array, MapOrigin::Global),
        (".rodata", MapType::Array, MapOrigin::Global),
        (".bss", MapType::Array, MapOrigin::Global),
    ] {
        assert!(names.contains(&want), "missing {want:?} in {names:?}");
    }
    let lpm = obj.maps.iter().find(|m| m.name == "lpm").unwrap();
    assert_eq!((lpm.key_size, lpm.value_size, lpm.flags), (8, 4, 1));
    let rodata = obj.maps.iter().find(|m| m.name == ".rodata").unwrap();
    assert!(rodata.readonly);
    assert_eq!(rodata.init.as_deref(), Some(&1u32.to_le_bytes()[..]));
    let data = obj.maps.iter().find(|m| m.name == ".data").unwrap();
    assert_eq!(data.init.as_deref(), Some(&60u32.to_le_bytes()[..]));
    assert!(obj.program(None).is_err(), "two programs: a name is needed");
    let first = obj.program(Some("first")).unwrap();
    assert_eq!(first.section, "xdp/first");
    // `first` calls the .text subprogram: .text is appended after it.
    assert!(first.insns.len() > 8 * 8);
    let e = obj.program(Some("third")).unwrap_err().to_string();
    assert!(e.contains("first") && e.contains("second"), "{e}");

    if !kernel::available() {
        eprintln!("skipped kernel half: bpf(2) needs root");
        return;
    }
    for name in ["first", "second"] {
        let p = obj.program(Some(name)).unwrap();
        let k = kernel::KernelProgram::load(&obj, p).unwrap_or_else(|e| panic!("{name}: {e}"));
        let small = k.test_run(&[0u8; 60]).unwrap();
        assert_eq!(small.action, 2, "{name}: XDP_PASS");
        if name == "first" {
            let big = k.test_run(&[0u8; 100]).unwrap();
            assert_eq!(big.action, 1, "over the threshold: .rodata's XDP_DROP");
            let counts = &k.maps[obj
                .maps
                .iter()
                .position(|m| m.name == "legacy_counts")
                .unwrap()];
            assert_eq!(
                counts.lookup(&1u32.to_le_bytes()).unwrap().unwrap(),
                1u64.to_le_bytes()
            );
        }
    }
}

#[test]
fn unsupported_helpers_and_map_types_are_refused_by_name() {
    let Some(path) = clang::compile("bad_helper") else {
        return;
    };
    let e = refused(&format!("@{}", path.display()), 1);
    assert!(e.contains("69") && e.contains("fib_lookup"), "{e}");
    let Some(path) = clang::compile("bad_map") else {
        return;
    };
    let obj = format!("@{}", path.display());
    // A program that uses a map of a type pfil does not run is refused,
    // naming the map and its type...
    let e = refused(&format!("{obj} program uses_ring"), 1);
    assert!(
        e.contains("uses_ring") && e.contains("\"events\" of type 22 (queue)"),
        "{e}"
    );
    // ...one that does not loads: its object's queue is not made, and
    // the control side says why.
    let f = pfil_xdp::XdpFilter::from_config(&format!("{obj} program unused"), 2).unwrap();
    let events = f.program().map("events").unwrap();
    assert_eq!((events.kind().raw(), events.kind().name()), (22, "queue"));
    assert!(!events.kind().runs() && events.entries().is_empty() && events.not_made().is_some());
    assert!(f
        .program()
        .map("sized")
        .unwrap()
        .not_made()
        .unwrap()
        .contains("max_entries 0"));
    for e in [
        events.lookup(&[0; 4]).unwrap_err(),
        events.update(&[0; 4], &[0; 4], 0).unwrap_err(),
        events.delete(&[0; 4]).unwrap_err(),
    ] {
        assert!(
            e.to_string().contains(
                "\"events\": type 22 (queue) is not one pfil runs; the program does not use it"
            ),
            "{e}"
        );
    }
    // An xskmap holds no socket here: a redirect into it misses and
    // returns its flags' action (XDP_PASS), and none can be set.
    let f = pfil_xdp::XdpFilter::from_config(&format!("{obj} program uses_xsk"), 1).unwrap();
    let mut frame = [0u8; 64];
    assert_eq!(
        f.program().run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
        2
    );
    let xsks = f.program().map("xsks").unwrap();
    let e = xsks
        .update(&[0; 4], &[3, 0, 0, 0], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("AF_XDP sockets"), "{e}");
    assert!(xsks.entries().is_empty());
    assert!(f.program().map("events").unwrap().lookup(&[]).is_err());
    // A map its loader sizes (max_entries 0) is refused as the kernel
    // refuses it, naming the config line that sizes it; with the line,
    // the program runs and uses it.
    let e = refused(&format!("{obj} program uses_sized"), 1);
    assert!(
        e.contains("max_entries 0") && e.contains("`map sized max_entries N`"),
        "{e}"
    );
    let e = refused(
        &format!("{obj} program uses_sized\nmap nosuch max_entries 4"),
        1,
    );
    assert!(e.contains("map nosuch: the object has no such map") && e.contains("sized"));
    let kernel = if pfil_xdp::kernel::available() {
        "\nverify kernel"
    } else {
        ""
    };
    let f = pfil_xdp::XdpFilter::from_config(
        &format!("{obj} program uses_sized\nmap sized max_entries 2{kernel}"),
        1,
    )
    .unwrap();
    let sized = f.program().map("sized").unwrap();
    assert_eq!(sized.max_entries(), 2);
    for q in [0u32, 1, 1, 5] {
        let mut frame = [0u8; 64];
        let r = f.program().run(0, &mut frame, 0, 64, 1, q).unwrap();
        assert_eq!(r.action, 1, "XDP_DROP");
    }
    let mut got = sized.entries();
    got.sort();
    // Queue 5's key did not fit: the map is full at 2 entries.
    assert_eq!(
        got,
        [
            (0u32.to_le_bytes().to_vec(), 1u64.to_le_bytes().to_vec()),
            (1u32.to_le_bytes().to_vec(), 2u64.to_le_bytes().to_vec())
        ]
    );
    let e = refused(&format!("@{BPF_DIR}/xdpdump_bpf.o"), 1);
    // fentry/fexit programs (their CO-RE relocations are not pfil's) and
    // a perf event array.
    assert!(
        e.contains("perf_event_array") || e.contains("no XDP program"),
        "{e}"
    );
}

#[test]
fn a_program_loads_beside_neighbours_pfil_refuses() {
    let Some(path) = clang::compile("neighbours") else {
        return;
    };
    let obj = format!("@{}", path.display());
    let f = pfil_xdp::XdpFilter::from_config(&format!("{obj} program plain"), 1).unwrap();
    let mut frame = [0u8; 64];
    assert_eq!(
        f.program().run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
        3
    );
    frame[13] = 1;
    assert_eq!(
        f.program().run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
        2
    );
    // The jump table, set the libbpf way: slot 1 is slot0, the first
    // program (number 1).
    let jmp = f.program().map("jmp").unwrap();
    assert_eq!((jmp.kind().name(), jmp.value_size()), ("prog_array", 4));
    assert!(jmp.not_made().is_none());
    assert_eq!(jmp.entries(), vec![(vec![1, 0, 0, 0], vec![1, 0, 0, 0])]);
    let e = refused(&format!("{obj} program uses_kfunc"), 1);
    assert!(
        e.contains("\"uses_kfunc\" calls kernel function \"bpf_dynptr_from_xdp\""),
        "{e}"
    );
    // `entry` tail-calls slot 1: slot0's XDP_DROP.
    let f = pfil_xdp::XdpFilter::from_config(&format!("{obj} program entry"), 1).unwrap();
    assert_eq!(
        f.program().run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
        1
    );
    // Without a name, every XDP program is listed, the refused one too.
    let e = refused(&obj, 1);
    assert!(e.contains("slot0, entry, plain, uses_kfunc"), "{e}");
}

#[test]
fn context_reads_the_kernel_refuses_are_refused() {
    let Some(path) = clang::compile("ctx_access") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    for (name, why) in [
        (
            "narrow",
            "1 bytes at offset 12 of struct xdp_md (its fields are read whole",
        ),
        ("egress", "offset 20 of struct xdp_md (egress_ifindex"),
        ("devmap", "a program for a devmap's or cpumap's entries"),
    ] {
        let e = XdpProgram::load(&obj, Some(name), 1, &[])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(why), "{name}: {e}");
        // The kernel refuses them too (its verifier: "invalid bpf_context
        // access"; a devmap's program is not loaded as an interface's).
        if pfil_xdp::kernel::available() && name != "devmap" {
            let p = obj.program(Some(name)).unwrap();
            let k = pfil_xdp::kernel::KernelProgram::load(&obj, p)
                .err()
                .unwrap();
            assert!(k.to_string().contains("invalid bpf_context access"), "{k}");
        }
    }
    let p = XdpProgram::load(&obj, Some("whole"), 1, &[]).unwrap();
    let mut frame = [0u8; 64];
    assert_eq!(p.run(0, &mut frame, 0, 64, 7, 0).unwrap().action, 1);
    assert_eq!(p.run(0, &mut frame, 0, 64, 8, 0).unwrap().action, 2);
}

#[test]
fn what_the_kernels_type_rules_refuse_is_refused() {
    const PKT_FAR: &str = "which may end more than 0xffff bytes from data, where no comparison \
         with data_end proves bytes (the kernel refuses it: R2 offset is outside of the packet";
    const ARRAY_KEY: &str = "a map value that may be null (the kernel refuses it: invalid mem \
         access 'map_value_or_null'; compare what bpf_map_lookup_elem returned with NULL \
         first, or key the array with a constant inside it the kernel sees";
    let Some(path) = clang::compile("kernel_refuses") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    let kernel = pfil_xdp::kernel::available();
    for (name, why) in [
        ("ptr_mul", "*= on a pointer"),
        ("ptr_alu32", "32-bit pointer arithmetic (+=)"),
        ("ptr_add_ptr", "pointer += pointer"),
        ("ptr_xor", "bitwise ^= on a pointer"),
        ("fp_shift", ">>= on a pointer"),
        ("mapptr_add", "pointer arithmetic on a map pointer"),
        ("pktend_deref", "dereference of data_end"),
        ("atomic_pkt", "an atomic operation on the packet"),
        ("ctx_mod_read", "dereference of a modified context pointer"),
        (
            "stack_misalign",
            "misaligned stack access [r10-12] of 8 bytes",
        ),
        (
            "ret_callee_stack",
            "returns a pointer into its own stack frame",
        ),
        (
            "adjhead_fp_ctx",
            "bpf_xdp_adjust_head's first argument must be the context, not a stack pointer",
        ),
        (
            "lookup_stack_map",
            "bpf_map_lookup_elem's first argument must be a map, not a stack pointer",
        ),
        ("loadbytes_len0", "bpf_xdp_load_bytes of 0 bytes"),
        (
            "stack_key_top",
            "bpf_map_lookup_elem's key (r2: 4 bytes at r10-2) runs past the top",
        ),
        (
            "callee_writes_caller",
            "stack access of 8 bytes at r10+8 is outside the function's frame",
        ),
        (
            "void_r0_exit",
            "reads r0, which a path reaching here leaves unset",
        ),
        (
            "partial_fill",
            "a 4-byte load of the pointer spilled at r10-8",
        ),
        (
            "partial_spill",
            "a pointer stored in 4 bytes of the stack at r10-4",
        ),
        ("spill_ctx_store", "store into the context"),
        ("spill_end_arith", "pointer arithmetic on data_end"),
        ("number_deref", "dereference of a number (r2 is 0 here)"),
        ("number_deref_ll", "dereference of a number (r1 is 13 here)"),
        (
            "pkt_unchecked",
            "invalid access to packet: a 1-byte read at offset 20 from data, where a \
             comparison with data_end proved 0 bytes",
        ),
        (
            "pkt_off_by_one",
            "a 1-byte read at offset 20 from data, where a comparison with data_end proved \
             20 bytes",
        ),
        ("pkt_write_past", "a 1-byte write at offset 14 from data"),
        ("pkt_after_adjust", "a 1-byte read at offset 0 from data"),
        ("pkt_short_path", "a 1-byte read at offset 30 from data"),
        (
            "pkt_var_unchecked",
            "a 1-byte read at offset 14 from a packet pointer r2 moved by a variable amount",
        ),
        (
            "pkt_stale_adjust",
            "a packet pointer from before bpf_xdp_adjust_head, which may move the packet",
        ),
        (
            "pkt_stale_spilled",
            "dereference of r2, a packet pointer from before bpf_xdp_adjust_tail",
        ),
        (
            "pkt_key_unproven",
            "invalid access to packet: bpf_map_lookup_elem's key (r2: 4 bytes at offset 12 \
             from data), where a comparison with data_end proved 14 bytes",
        ),
        (
            "pkt_value_unproven",
            "bpf_map_update_elem's value (r3: 8 bytes at offset 10 from data)",
        ),
        (
            "value_var_past",
            "invalid access to map value: a 1-byte access at offset 0 plus up to 15, in a map \
             value of 8 bytes",
        ),
        (
            "value_moved_past",
            "access of 4 bytes at offset 6 of a map value of 8 bytes",
        ),
        (
            "stack_var_past",
            "invalid variable-offset stack access: a 1-byte access at r10-8 plus up to 15",
        ),
        (
            "value_flag_wrong",
            "invalid access to map value: a 1-byte access at offset 0 plus up to 15",
        ),
        (
            "rodata_write",
            "a 4-byte store at offset 0 of read-only global data (the kernel refuses it: write \
             into map forbidden",
        ),
        (
            "ro_store",
            "a store into a map value (8 bytes): write into map forbidden",
        ),
        ("ro_update", "bpf_map_update_elem: write into map forbidden"),
        (
            "ro_load_bytes",
            "bpf_xdp_load_bytes's r3 is a map value: write into map forbidden",
        ),
        (
            "wo_load",
            "a load from a map value (8 bytes): read from map forbidden",
        ),
        (
            "wo_update_from",
            "bpf_map_update_elem's r3 is a map value: read from map forbidden",
        ),
        ("pkt_moved_16bit", PKT_FAR),
        ("pkt_moved_past_64k", PKT_FAR),
        (
            "value_null_moved",
            "pointer arithmetic (+=) on r0, a map value that may be null (the kernel refuses it",
        ),
        ("array_key_ctx", ARRAY_KEY),
        ("array_key_misc", ARRAY_KEY),
        ("array_key_outside", ARRAY_KEY),
        ("array_key_spill8", ARRAY_KEY),
        ("array_key_scrubbed", ARRAY_KEY),
        ("array_key_across", ARRAY_KEY),
        (
            "value_no_null_check",
            "dereference of r0, a map value that may be null (the kernel refuses it: invalid \
             mem access 'map_value_or_null'",
        ),
    ] {
        clang::refused_by_both(&obj, name, why, kernel);
    }
    for name in [
        "dead_branch_ctx",
        "null_copy_arith",
        "ctx_roundtrip",
        "ctx_add_zero",
        "ctx_roundtrip_helper",
        "mapptr_add0",
        "stack_ptr_back_in",
        "stack_key_fits",
        "void_r0_set_after",
        "whole_fill",
        "overwritten_fill",
        "spill_ctx_read",
        "spill_then_helper_bytes",
        "known_signed_dead",
        "pkt_flag_paths",
        "pkt_const_paths",
        "pkt_spill_copy_proven",
        "value_null_copy_checked",
        "value_array_zero_key",
        "array_key_spill4",
        "array_key_spill_top",
        "array_key_zero_beside",
        "array_key_two_paths",
        "array_key_kept",
        "array_key_filled_zero",
        "array_key_shifted_out",
        "array_key_pruned_path",
        "array_key_percpu",
        "pkt_moved_15bit",
        "value_null_five_spilled",
        "ro_load",
        "wo_store",
        "wo_update",
        "value_clamp_reg",
        "value_count_copy",
        "value_null_filled_check",
        "value_null_callee_check",
        "pkt_kept_ktime",
        "pkt_kept_store",
        "pkt_reload_adjust",
        "pkt_key_proven",
        "value_var_inside",
        "value_moved_inside",
        "stack_var_inside",
        "value_flag_paths",
    ] {
        let p =
            XdpProgram::load(&obj, Some(name), 1, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut frame = [0u8; 64];
        assert_eq!(
            p.run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
            2,
            "{name}"
        );
        if kernel {
            let k = obj.program(Some(name)).unwrap();
            let r = pfil_xdp::kernel::KernelProgram::load(&obj, k);
            assert!(r.is_ok(), "{name}: the kernel refuses it: {:?}", r.err());
        }
    }
}

#[test]
fn a_program_reaches_only_its_own_workers_per_cpu_values() {
    let Some(path) = clang::compile("percpu_reach") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    for engine in [Engine::Jit, Engine::Interpreter] {
        let p = XdpProgram::load_on(&obj, None, 2, &[], engine).unwrap();
        let vals = p.map("vals").unwrap();
        // Worker 0's value 1, worker 1's value 7 (8 bytes each, padded).
        let stride = vals.user_value_size() / vals.workers();
        let mut v = vec![0u8; vals.user_value_size()];
        v[0] = 1;
        v[stride] = 7;
        vals.update(&0u32.to_le_bytes(), &v, 0).unwrap();
        let mut frame = [0u8; 64];
        // Its own value: read.
        assert_eq!(p.run(0, &mut frame, 0, 64, 1, 0).unwrap().action, 2);
        assert_eq!(p.run(1, &mut frame, 0, 64, 1, 0).unwrap().action, 1);
        // Worker 1's value from worker 0 (the next section): a fault,
        // not a read (it read 7 and dropped).
        let r = p.run(0, &mut frame, 0, 64, 1, 64);
        assert!(r.is_err(), "{engine:?}: {r:?}");
    }
}

#[test]
fn co_re_relocates_the_context_by_field_name() {
    let Some(path) = clang::compile("co_re") else {
        return;
    };
    for engine in [Engine::Jit, Engine::Interpreter] {
        let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
        let prog = XdpProgram::load_on(&obj, None, 1, &[], engine).unwrap();
        let mut f = [0u8; 64];
        let r = prog.run(0, &mut f, 0, 64, 7, 3).unwrap();
        assert_eq!(
            r.action, 2,
            "{engine:?}: no_such_field does not exist in pfil"
        );
        assert_eq!(
            f[..2],
            [3, 7],
            "{engine:?}: rx_queue_index, ingress_ifindex"
        );
    }
}

#[test]
fn legacy_sections_run_when_named_and_kfuncs_are_refused_by_name() {
    let Some(path) = clang::compile("legacy") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    assert!(obj.programs.is_empty(), "no section named xdp");
    let e = obj.program(None).unwrap_err().to_string();
    assert!(
        e.contains("legacy (section \"xdp_legacy\")") && e.contains("program NAME"),
        "{e}"
    );
    assert_eq!(obj.program(Some("legacy")).unwrap().section, "xdp_legacy");
    let e = obj.program(Some("not_xdp")).unwrap_err().to_string();
    assert!(e.contains("\"tc\"") && e.contains("another type"), "{e}");
    let e = obj.program(Some("kfunc")).unwrap_err().to_string();
    assert!(
        e.contains("kernel function \"bpf_dynptr_from_xdp\"") && e.contains("kfunc"),
        "{e}"
    );
    let filter =
        pfil_xdp::XdpFilter::from_config(&format!("@{} program legacy", path.display()), 1)
            .unwrap();
    let mut f = [0u8; 64];
    assert_eq!(
        filter.program().run(0, &mut f, 0, 64, 1, 0).unwrap().action,
        1
    );
}

#[test]
fn every_installed_object_loads_or_is_refused_by_name() {
    let Ok(dir) = std::fs::read_dir(BPF_DIR) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{BPF_DIR} missing under CI"
        );
        return;
    };
    let mut seen = 0;
    for e in dir.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "o") {
            continue;
        }
        seen += 1;
        let names: Vec<String> = match Object::parse(&std::fs::read(&path).unwrap()) {
            Ok(o) => o.programs.iter().map(|p| p.name.clone()).collect(),
            Err(e) => {
                eprintln!("{}: refused: {e}", path.display());
                let m = e.to_string();
                assert!(
                    m.contains("unsupported") || m.contains("not supported"),
                    "a refusal names its reason: {m}"
                );
                continue;
            }
        };
        if names.is_empty() {
            eprintln!("{}: no XDP program", path.display());
        }
        for n in names {
            match pfil_xdp::XdpFilter::from_config(&format!("@{} program {n}", path.display()), 2) {
                Ok(_) => eprintln!("{} {n}: loads", path.display()),
                Err(e) => {
                    eprintln!("{} {n}: refused: {e}", path.display());
                    assert!(
                        e.contains("unsupported")
                            || e.contains("not supported")
                            || e.contains("verifier"),
                        "a refusal names its reason: {e}"
                    );
                }
            }
        }
    }
    assert!(seen >= 10);
}

#[test]
fn frozen_rodata_settings_rule_code_out_as_in_the_kernel() {
    // tests/c/unseen/rodata_dead_*.c: code under a `const volatile`
    // setting that is 0. pfil folds the frozen `.rodata` as the kernel
    // does: a helper pfil lacks there, or a variable set and read only
    // there, is no refusal. Set to 1 in the hook's config (before load,
    // as a skeleton sets it), the code is live and checked.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/unseen");
    let Some(helper) = clang::compile_in(&dir, "rodata_dead_helper") else {
        return;
    };
    let Some(uninit) = clang::compile_in(&dir, "rodata_dead_uninit") else {
        return;
    };
    let config = |o: &std::path::Path, knob: u8| {
        format!(
            "@{}; map .rodata key 0 0 0 0 value {knob} 0 0 0",
            o.display()
        )
    };
    for o in [&helper, &uninit] {
        let f = pfil_xdp::XdpFilter::from_config(&config(o, 0), 1)
            .unwrap_or_else(|e| panic!("{}: {e}", o.display()));
        let mut frame = [0u8; 64];
        assert_eq!(
            f.program().run(0, &mut frame, 0, 64, 1, 0).unwrap().action,
            2
        );
        // Frozen: the control side cannot change what the verifier read.
        let rodata = f.program().map(".rodata").unwrap();
        let e = rodata.update(&[0; 4], &[1, 0, 0, 0], 0).unwrap_err();
        assert!(format!("{e:?}").contains("frozen"), "{e:?}");
    }
    let e = pfil_xdp::XdpFilter::from_config(&config(&helper, 1), 1)
        .err()
        .unwrap();
    assert!(e.contains("helper 69 (bpf_fib_lookup)"), "{e}");
    // The variable is set and read on the same live path now.
    let f = pfil_xdp::XdpFilter::from_config(&config(&uninit, 1), 1).unwrap();
    let mut frame = [0u8; 64];
    assert_eq!(
        f.program().run(0, &mut frame, 0, 64, 1, 3).unwrap().action,
        2
    );
    let out = f.program().map("out").unwrap();
    let want = 3u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    assert_eq!(out.lookup(&[0; 4]).unwrap().unwrap(), want.to_le_bytes());
    // A bad setting is named.
    let e = pfil_xdp::XdpFilter::from_config(
        &format!(
            "@{}; map .rodata key 1 0 0 0 value 1 0 0 0",
            uninit.display()
        ),
        1,
    )
    .err()
    .unwrap();
    assert!(e.contains("read-only global data"), "{e}");
}
