#![no_main]

#[path = "../checks/partial_json.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
