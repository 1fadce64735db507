//! Zig's std.crypto on generated data: hashes (SHA-256, SHA-512, SHA3-256, BLAKE2b, BLAKE3),
//! MACs (HMAC-SHA256, Poly1305 via the AEADs), AEADs (ChaCha20-Poly1305, XChaCha20-Poly1305,
//! AES-256-GCM in software, AEGIS-128L) with encrypt-then-decrypt checks, PBKDF2, and
//! public-key work (Ed25519 and ECDSA P-256 sign/verify, X25519 key agreement).
//!
//!   zig-crypto ROUNDS
const std = @import("std");
const crypto = std.crypto;

var digest = crypto.hash.sha2.Sha256.init(.{});

fn feed(bytes: []const u8) void {
    digest.update(bytes);
}

fn aeadRoundTrip(comptime Aead: type, alloc: std.mem.Allocator, msg: []const u8, ad: []const u8, round: u32) !void {
    var key: [Aead.key_length]u8 = undefined;
    var nonce: [Aead.nonce_length]u8 = undefined;
    var prng = std.Random.DefaultPrng.init(0xae ^ @as(u64, round));
    prng.random().bytes(&key);
    prng.random().bytes(&nonce);
    const c = try alloc.alloc(u8, msg.len);
    defer alloc.free(c);
    const m = try alloc.alloc(u8, msg.len);
    defer alloc.free(m);
    var tag: [Aead.tag_length]u8 = undefined;
    Aead.encrypt(c, &tag, msg, ad, nonce, key);
    try Aead.decrypt(m, c, tag, ad, nonce, key);
    if (!std.mem.eql(u8, m, msg)) return error.AeadMismatch;
    // A flipped bit must fail authentication.
    c[c.len / 2] ^= 1;
    if (Aead.decrypt(m, c, tag, ad, nonce, key)) |_| return error.ForgeryAccepted else |_| {}
    feed(&tag);
    feed(c[0..64]);
}

fn hashInto(comptime H: type, data: []const u8) void {
    var out: [H.digest_length]u8 = undefined;
    H.hash(data, &out, .{});
    feed(&out);
}

pub fn main() !void {
    const alloc = std.heap.wasm_allocator;
    const args = try std.process.argsAlloc(alloc);
    defer std.process.argsFree(alloc, args);
    const rounds = if (args.len > 1) try std.fmt.parseInt(u32, args[1], 10) else 1;

    const size = 1 << 19;
    const data = try alloc.alloc(u8, size);
    defer alloc.free(data);
    var prng = std.Random.DefaultPrng.init(0x5eed);
    prng.random().bytes(data);
    const ad = "pepper corpus associated data";

    var signatures: u32 = 0;
    var r: u32 = 0;
    while (r < rounds) : (r += 1) {
        // Each round changes the data a little, so rounds differ.
        data[(r * 4099) % size] +%= 1;

        hashInto(crypto.hash.sha2.Sha256, data);
        hashInto(crypto.hash.sha2.Sha512, data);
        hashInto(crypto.hash.sha3.Sha3_256, data);
        hashInto(crypto.hash.blake2.Blake2b512, data);
        hashInto(crypto.hash.Blake3, data);

        var mac: [crypto.auth.hmac.sha2.HmacSha256.mac_length]u8 = undefined;
        crypto.auth.hmac.sha2.HmacSha256.create(&mac, data[0 .. size / 4], "key");
        feed(&mac);

        try aeadRoundTrip(crypto.aead.chacha_poly.ChaCha20Poly1305, alloc, data, ad, r);
        try aeadRoundTrip(crypto.aead.chacha_poly.XChaCha20Poly1305, alloc, data[0 .. size / 2], ad, r);
        try aeadRoundTrip(crypto.aead.aes_gcm.Aes256Gcm, alloc, data[0 .. size / 4], ad, r);
        try aeadRoundTrip(crypto.aead.aegis.Aegis128L, alloc, data, ad, r);

        var dk: [32]u8 = undefined;
        try crypto.pwhash.pbkdf2(&dk, "password", data[0..16], 200, crypto.auth.hmac.sha2.HmacSha256);
        feed(&dk);

        // Public-key work on a few messages.
        var seed: [32]u8 = undefined;
        crypto.hash.sha2.Sha256.hash(data[r % 1000 .. r % 1000 + 64], &seed, .{});
        const ed = try crypto.sign.Ed25519.KeyPair.generateDeterministic(seed);
        const ec = try crypto.sign.ecdsa.EcdsaP256Sha256.KeyPair.generateDeterministic(seed);
        var k: u32 = 0;
        while (k < 4) : (k += 1) {
            const msg = data[k * 512 .. k * 512 + 300];
            const s1 = try ed.sign(msg, null);
            try s1.verify(msg, ed.public_key);
            feed(&s1.toBytes());
            const s2 = try ec.sign(msg, null);
            try s2.verify(msg, ec.public_key);
            feed(&s2.toBytes());
            signatures += 2;
        }
        const alice = try crypto.dh.X25519.KeyPair.generateDeterministic(seed);
        var seed2 = seed;
        seed2[0] ^= 0xff;
        const bob = try crypto.dh.X25519.KeyPair.generateDeterministic(seed2);
        const s_ab = try crypto.dh.X25519.scalarmult(alice.secret_key, bob.public_key);
        const s_ba = try crypto.dh.X25519.scalarmult(bob.secret_key, alice.public_key);
        if (!std.mem.eql(u8, &s_ab, &s_ba)) return error.X25519Mismatch;
        feed(&s_ab);
    }
    var out: [32]u8 = undefined;
    digest.final(&out);
    try std.io.getStdOut().writer().print("zig-crypto: {d} rounds over {d} bytes, {d} signatures, digest {s}\n", .{ rounds, size, signatures, std.fmt.fmtSliceHexLower(&out) });
}
