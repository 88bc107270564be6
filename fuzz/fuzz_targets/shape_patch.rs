#![no_main]

#[path = "../checks/shape_patch.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
