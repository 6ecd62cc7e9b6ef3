//! Benchmarks live beside this crate as `[[bench]]` targets.
