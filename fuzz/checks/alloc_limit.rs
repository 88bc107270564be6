//! A global allocator for fuzz targets that turns one oversized allocation into a crash.
//!
//! libFuzzer's `-malloc_limit_mb` needs a sanitizer's allocator hooks, so a build without a
//! sanitizer (`-s none`, several times faster) would never notice an input that makes the
//! code reserve hundreds of MB: its peak RSS rises once and the run goes on. This allocator
//! aborts on any single allocation over [`LIMIT`] bytes, after writing its size; libFuzzer then
//! saves the input as a crash. Fallible reservations (`try_reserve`) count too: a bounded
//! server must not ask for that much on a peer's word either.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a fuzz input may cause (64 MiB; a frame is at most 255 bytes).
pub const LIMIT: usize = 64 << 20;

pub struct Limited;

fn check(size: usize) {
    if size > LIMIT {
        // No allocation here: format into a stack buffer.
        let mut buf = [0u8; 64];
        let mut n = size;
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let msg = b"\n== oversized allocation (bytes): ";
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(msg);
        let _ = err.write_all(&buf[i..]);
        let _ = err.write_all(b"\n");
        std::process::abort();
    }
}

// SAFETY: forwards every call to `System` unchanged; only reads the requested size first.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
