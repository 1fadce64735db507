//! Driver for RustCrypto's `sha2` and `chacha20poly1305` (pure Rust, no assembly on wasm):
//! `sha-chacha FILE ROUNDS` hashes a text with SHA-256 and SHA-512, and ROUNDS times derives a
//! key from the running digest, seals the text in 16 KiB chunks with ChaCha20-Poly1305 and
//! XChaCha20-Poly1305, hashes the ciphertext, opens every chunk again and checks it, then
//! prints the final digests.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305};
use sha2::{Digest, Sha256, Sha512};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("/data/input-small.txt");
    let rounds: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));

    let mut state: [u8; 32] = Sha256::digest(&text).into();
    let mut sealed_total = 0usize;
    let mut last512 = [0u8; 64];
    for round in 0..rounds {
        let key: [u8; 32] = Sha256::new()
            .chain_update(state)
            .chain_update(round.to_le_bytes())
            .finalize()
            .into();
        let aead = ChaCha20Poly1305::new(&key.into());
        let xaead = XChaCha20Poly1305::new(&state.into());
        let mut h512 = Sha512::new();
        let mut sealed = Vec::new();
        for (i, chunk) in text.chunks(16 * 1024).enumerate() {
            let aad = (i as u64).to_be_bytes();
            let ct = if i % 2 == 0 {
                let mut nonce = [0u8; 12];
                nonce[..8].copy_from_slice(&aad);
                aead.encrypt(&nonce.into(), Payload { msg: chunk, aad: &aad }).unwrap()
            } else {
                let mut nonce = [0u8; 24];
                nonce[..8].copy_from_slice(&aad);
                nonce[8..].copy_from_slice(&key[..16]);
                xaead.encrypt(&nonce.into(), Payload { msg: chunk, aad: &aad }).unwrap()
            };
            h512.update(&ct);
            sealed.push(ct);
        }
        for (i, (ct, chunk)) in sealed.iter().zip(text.chunks(16 * 1024)).enumerate() {
            let aad = (i as u64).to_be_bytes();
            let pt = if i % 2 == 0 {
                let mut nonce = [0u8; 12];
                nonce[..8].copy_from_slice(&aad);
                aead.decrypt(&nonce.into(), Payload { msg: ct, aad: &aad }).expect("opens")
            } else {
                let mut nonce = [0u8; 24];
                nonce[..8].copy_from_slice(&aad);
                nonce[8..].copy_from_slice(&key[..16]);
                xaead.decrypt(&nonce.into(), Payload { msg: ct, aad: &aad }).expect("opens")
            };
            assert!(pt == chunk, "chunk {i} round trip");
        }
        sealed_total = sealed.iter().map(Vec::len).sum();
        last512 = h512.finalize().into();
        state = Sha256::digest(last512).into();
    }
    println!("{} bytes, {rounds} rounds, {sealed_total} bytes sealed", text.len());
    println!("sha512 {}", hex(&last512));
    println!("state  {}", hex(&state));
}
