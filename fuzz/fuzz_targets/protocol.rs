#![no_main]

#[path = "../checks/protocol.rs"]
mod check;

#[path = "../checks/alloc_limit.rs"]
mod alloc_limit;

#[global_allocator]
static ALLOC: alloc_limit::Limited = alloc_limit::Limited;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
