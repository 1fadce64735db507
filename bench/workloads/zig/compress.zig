//! Zig's standard library compressors on a generated text: unpacks an xz file and a gzip file
//! (both made by Python's lzma and gzip modules), then deflates the text with raw deflate,
//! zlib and gzip framing at several levels, inflates each result again and checks it, and
//! hashes everything with CRC-32, Adler-32 and xxHash64.
//!
//!   zig-compress FILE.txt ROUNDS      (FILE.txt.xz and FILE.txt.gz must lie beside FILE.txt)
const std = @import("std");
const flate = std.compress.flate;

var checksum: u64 = 0xcbf29ce484222325;
fn mix(v: u64) void {
    checksum = (checksum ^ v) *% 0x100000001b3;
}

/// Opens FILE under the WASI preopen that holds its directory (e.g. /data).
fn readFile(alloc: std.mem.Allocator, preopens: std.fs.wasi.Preopens, path: []const u8) ![]u8 {
    const slash = std.mem.lastIndexOfScalar(u8, path, '/') orelse return error.NeedsDirectory;
    const fd = preopens.find(path[0..slash]) orelse return error.NoPreopen;
    const dir = std.fs.Dir{ .fd = fd };
    const file = try dir.openFile(path[slash + 1 ..], .{});
    defer file.close();
    return try file.readToEndAlloc(alloc, 1 << 30);
}

fn digest(data: []const u8) void {
    mix(std.hash.Crc32.hash(data));
    mix(std.hash.Adler32.hash(data));
    mix(std.hash.XxHash64.hash(7, data));
    mix(data.len);
}

fn roundTrip(comptime container: anytype, alloc: std.mem.Allocator, text: []const u8, level: flate.deflate.Level, out: std.fs.File.Writer) !void {
    var packed_buf = std.ArrayList(u8).init(alloc);
    defer packed_buf.deinit();
    var src = std.io.fixedBufferStream(text);
    try flate.deflate.compress(container, src.reader(), packed_buf.writer(), .{ .level = level });

    var back = std.ArrayList(u8).init(alloc);
    defer back.deinit();
    var packed_stream = std.io.fixedBufferStream(packed_buf.items);
    try flate.inflate.decompress(container, packed_stream.reader(), back.writer());
    if (!std.mem.eql(u8, back.items, text)) return error.RoundTripMismatch;
    digest(packed_buf.items);
    try out.print("  {s} level {s}: {d} -> {d} bytes, crc32 {x:0>8}\n", .{ @tagName(container), @tagName(level), text.len, packed_buf.items.len, std.hash.Crc32.hash(packed_buf.items) });
}

pub fn main() !void {
    const alloc = std.heap.wasm_allocator;
    const args = try std.process.argsAlloc(alloc);
    defer std.process.argsFree(alloc, args);
    if (args.len < 3) return error.Usage;
    const rounds = try std.fmt.parseInt(u32, args[2], 10);
    var preopens = try std.fs.wasi.preopensAlloc(alloc);
    _ = &preopens;
    const out = std.io.getStdOut().writer();

    const text = try readFile(alloc, preopens, args[1]);
    defer alloc.free(text);
    const xz_path = try std.fmt.allocPrint(alloc, "{s}.xz", .{args[1]});
    const gz_path = try std.fmt.allocPrint(alloc, "{s}.gz", .{args[1]});
    const xz_data = try readFile(alloc, preopens, xz_path);
    const gz_data = try readFile(alloc, preopens, gz_path);

    var r: u32 = 0;
    while (r < rounds) : (r += 1) {
        try out.print("round {d}\n", .{r});
        // xz (LZMA2) made by Python: decompress and compare.
        var xz_stream = std.io.fixedBufferStream(xz_data);
        var xz = try std.compress.xz.decompress(alloc, xz_stream.reader());
        const unxz = try xz.reader().readAllAlloc(alloc, 1 << 30);
        xz.deinit();
        if (!std.mem.eql(u8, unxz, text)) return error.XzMismatch;
        alloc.free(unxz);
        // gzip made by Python.
        var gz_stream = std.io.fixedBufferStream(gz_data);
        var ungz = std.ArrayList(u8).init(alloc);
        try std.compress.gzip.decompress(gz_stream.reader(), ungz.writer());
        if (!std.mem.eql(u8, ungz.items, text)) return error.GzipMismatch;
        ungz.deinit();
        digest(text);

        // Each round works on a different slice of the text, so rounds differ.
        const start = (r * 7919) % (text.len / 4);
        const part = text[start..];
        try roundTrip(.raw, alloc, part, .fast, out);
        try roundTrip(.zlib, alloc, part, .default, out);
        try roundTrip(.gzip, alloc, part, .best, out);
        try roundTrip(.raw, alloc, part[0 .. part.len / 3], .level_5, out);
    }
    try out.print("zig-compress: {d} bytes, {d} rounds, checksum {x:0>16}\n", .{ text.len, rounds, checksum });
}
