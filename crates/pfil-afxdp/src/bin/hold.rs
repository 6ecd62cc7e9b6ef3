//! Placeholder, replaced by the port-holding helper.
fn main() {}
