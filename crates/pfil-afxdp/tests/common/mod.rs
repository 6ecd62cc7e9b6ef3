//! Shared test helpers: the namespaces and veth pairs of `pfil-testnet`,
//! plus running a closure on a thread inside a namespace.
#![allow(dead_code)]

pub use pfil_testnet::*;

/// Run a closure on a fresh thread that has entered a namespace.
pub trait RunIn {
    /// Spawn `f` on a thread that entered this namespace first.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T>;
}

impl RunIn for Netns {
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let name = self.name.clone();
        std::thread::spawn(move || {
            pfil_afxdp::enter_netns(&name).expect("setns");
            f()
        })
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "pfil_afxdp=info".to_owned()))
        .with_test_writer()
        .try_init();
}

/// Wait (bounded, 20 s) until `cond` holds; `false` if it never did.
pub fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    cond()
}
