//! Writes the JIT's machine code of an object's XDP program to a file:
//! `cargo run -p pfil-xdp --example jit_dump -- OBJ OUT`, then
//! `objdump -D -b binary -m i386:x86-64 OUT`.

fn main() {
    let mut a = std::env::args().skip(1);
    let (obj, out) = (a.next().expect("OBJ"), a.next().expect("OUT"));
    let f = pfil_xdp::XdpFilter::from_config(&format!("@{obj}"), 1).unwrap();
    let code = f.program().engine().machine_code().expect("not jitted");
    std::fs::write(&out, code).unwrap();
    println!("{} bytes", code.len());
}
