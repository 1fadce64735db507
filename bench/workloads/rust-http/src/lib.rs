//! A `wasi:http/proxy` component for `pepper serve` (the way `wasmtime serve` runs one):
//! it exports `wasi:http/incoming-handler`. The request body, if any, is drained (any
//! method), then
//!
//!   /hash?n=N       N rounds of a mix-and-hash over a 256-byte state (N defaults to 1000):
//!                   `200`, `hash=<16 hex digits>\n`; `400` if N is not a number up to 10^7
//!   /               `200`, a short text
//!   anything else   `404`
//!
//! The work is deterministic and allocates nothing in the loop; `mix` and `fnv1a` are kept
//! out of line so that profiles show them as their own functions. `no_std`, so that the
//! component imports nothing outside the `wasi:http/proxy` world.
#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use wasi::exports::http::incoming_handler::Guest;
use wasi::http::types::{
    Fields, IncomingBody, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

// memcmp and friends: from the target's own wasi-libc (pure functions, no imports).
#[link(name = "c")]
extern "C" {}

// The canonical ABI's allocator (std exports it on wasm32-wasip2; no_std has to).
#[no_mangle]
unsafe extern "C" fn cabi_realloc(
    old: *mut u8,
    old_len: usize,
    align: usize,
    len: usize,
) -> *mut u8 {
    use alloc::alloc::{alloc, realloc, Layout};
    let ptr = if old_len == 0 {
        if len == 0 {
            return align as *mut u8;
        }
        alloc(Layout::from_size_align_unchecked(len, align))
    } else {
        realloc(old, Layout::from_size_align_unchecked(old_len, align), len)
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable()
    }
    ptr
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

struct HttpHash;

wasi::http::proxy::export!(HttpHash);

const MAX_ROUNDS: u32 = 10_000_000;

impl Guest for HttpHash {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        drain(&request);
        let path: String = request.path_with_query().unwrap_or_default();
        let (route, query) = path.split_once('?').unwrap_or((&path, ""));
        let (status, body) = match route {
            "/" => (200, "pepper http-hash: GET /hash?n=ROUNDS\n".to_string()),
            "/hash" => match rounds(query) {
                Some(n) => (200, format!("hash={:016x}\n", hash(n))),
                None => (400, format!("n must be a number from 0 to {MAX_ROUNDS}\n")),
            },
            _ => (404, "not found\n".to_string()),
        };
        respond(response_out, status, body.as_bytes());
    }
}

/// `n` from the query string: 1000 when absent, `None` when not a number or too large.
fn rounds(query: &str) -> Option<u32> {
    match query.split('&').find_map(|kv| kv.strip_prefix("n=")) {
        None => Some(1000),
        Some(v) => v.parse().ok().filter(|&n| n <= MAX_ROUNDS),
    }
}

/// Reads the request body to its end and throws it away.
fn drain(request: &IncomingRequest) {
    let Ok(body) = request.consume() else { return };
    if let Ok(stream) = body.stream() {
        while stream.blocking_read(64 * 1024).is_ok() {}
    }
    drop(IncomingBody::finish(body));
}

fn respond(out: ResponseOutparam, status: u16, body: &[u8]) {
    let headers = Fields::from_list(&[("content-type".to_string(), b"text/plain".to_vec())])
        .expect("valid header");
    let response = OutgoingResponse::new(headers);
    response.set_status_code(status).expect("valid status");
    let outgoing = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    {
        let stream = outgoing.write().expect("stream taken once");
        for chunk in body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .expect("body written");
        }
    }
    OutgoingBody::finish(outgoing, None).expect("body finished");
}

/// `n` rounds: mix the state, then fold its FNV-1a hash into the result.
fn hash(n: u32) -> u64 {
    let mut state = [0u64; 32];
    for (i, w) in state.iter_mut().enumerate() {
        *w = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let mut acc = 0x243f_6a88_85a3_08d3u64;
    for round in 0..n {
        mix(&mut state, round);
        acc = acc.rotate_left(5) ^ fnv1a(&state);
    }
    acc
}

/// An xorshift step on each word, then a multiply or a rotate depending on its low bit.
#[inline(never)]
fn mix(state: &mut [u64; 32], round: u32) {
    let mut carry = round as u64;
    for w in state.iter_mut() {
        let mut x = *w ^ carry;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = if x & 1 == 0 {
            x.wrapping_mul(0xff51_afd7_ed55_8ccd)
        } else {
            x.rotate_right(29)
        };
        *w = x;
        carry = x;
    }
}

/// FNV-1a (64-bit) over the state's bytes.
#[inline(never)]
fn fnv1a(state: &[u64; 32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in state {
        for b in w.to_le_bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
