//! Driver for miniz_oxide (a Rust port of miniz's deflate and inflate), built for
//! wasm32-wasip2: compresses a generated text at three levels, inflates each result and
//! checks it, ROUNDS times (`deflate-p2 ROUNDS`), then prints the compressed sizes.

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    // Lines of a log-like text: repeated words with varying numbers, so that both the
    // matcher and the literal coder work.
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
    let mut data = Vec::new();
    let mut x: u32 = 12345;
    for i in 0..60_000u32 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let w = words[(x >> 16) as usize % words.len()];
        data.extend_from_slice(format!("{i:06} {w} {} {}\n", x % 1000, w.len()).as_bytes());
    }
    let mut sizes = Vec::new();
    for _ in 0..rounds {
        sizes.clear();
        for level in [1u8, 6, 9] {
            let packed = miniz_oxide::deflate::compress_to_vec(&data, level);
            let unpacked = miniz_oxide::inflate::decompress_to_vec(&packed).expect("inflates");
            assert_eq!(unpacked, data, "round trip at level {level}");
            sizes.push(packed.len());
        }
    }
    println!("{} bytes -> {:?}", data.len(), sizes);
}
