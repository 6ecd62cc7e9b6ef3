//! Programs that escaped the sandbox or ran otherwise than the kernel
//! (`tests/c/escapes.c`, from a red-team read of the verifier): refused
//! with the kernel's reason, or run by the JIT and the interpreter as the
//! kernel runs them. With the kernel here (root), its decisions too.

mod clang;

use pfil_xdp::{Engine, Object, XdpProgram};

#[test]
fn what_escaped_is_refused_or_runs_as_the_kernel_runs_it() {
    let Some(path) = clang::compile("escapes") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    // (The hand-written LDDW of `rodata_as_map` names map 5.)
    assert!(
        obj.maps[5].name.starts_with(".rodata"),
        "{:?}",
        obj.maps[5].name
    );
    let kernel = pfil_xdp::kernel::available();
    for (name, why) in [
        (
            "rodata_as_map",
            "bpf_map_update_elem: write into map forbidden (the kernel refuses it: the map's \
             BPF_F_RDONLY_PROG",
        ),
        (
            "null_loop_names",
            "dereference of r7, a map value that may be null",
        ),
        (
            "devmap_store",
            "a store into a map value (4 bytes): write into map forbidden",
        ),
    ] {
        clang::refused_by_both(&obj, name, why, kernel);
    }
    for engine in [Engine::Jit, Engine::Interpreter] {
        let p = XdpProgram::load_on(&obj, Some("ring_swapped"), 1, &[], engine)
            .unwrap_or_else(|e| panic!("ring_swapped: {e}"));
        for (len, action) in [(64, 2), (80, 2), (40, 3), (14, 3)] {
            let mut frame = vec![0u8; 256];
            let r = p.run(0, &mut frame, 0, len, 1, 0).unwrap();
            assert_eq!(r.action, action, "{engine:?}, a frame of {len} bytes");
        }
    }
    // A tail call into a program whose inlined lookup reads its key
    // through r10 alone: runs (the key is whatever its stack holds).
    for engine in [Engine::Jit, Engine::Interpreter] {
        let p = XdpProgram::load_on(&obj, Some("key_frame_a"), 1, &[], engine).unwrap();
        let n = p.tail_number("key_frame_b").unwrap();
        p.map("jt")
            .unwrap()
            .update(&0u32.to_le_bytes(), &n.to_le_bytes(), 0)
            .unwrap();
        let mut frame = vec![0u8; 256];
        let r = p.run(0, &mut frame, 0, 64, 1, 0).unwrap();
        assert!(r.action <= 3, "{engine:?}: {}", r.action);
    }
    if kernel {
        let p = obj.program(Some("ring_swapped")).unwrap();
        let r = pfil_xdp::kernel::KernelProgram::load(&obj, p);
        assert!(
            r.is_ok(),
            "ring_swapped: the kernel refuses it: {:?}",
            r.err()
        );
    }
}
