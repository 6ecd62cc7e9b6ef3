//! Writes the engine's machine code of a tcpdump expression (on Ethernet)
//! to a file: `cargo run -p pfil-filters --example bpf_dump -- 'EXPR' OUT`,
//! then `objdump -D -b binary -m i386:x86-64 OUT`.

fn main() {
    let mut a = std::env::args().skip(1);
    let (expr, out) = (a.next().expect("EXPR"), a.next().expect("OUT"));
    let p = pfil_filters::bpf::Program::compile(&expr, pfil_filters::bpf::Link::Ethernet)
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    let code = p.machine_code().expect("not on the engine");
    std::fs::write(&out, code).unwrap();
    println!("{} bytes", code.len());
}
