//! Integration tests live beside this crate as `[[test]]` targets.
