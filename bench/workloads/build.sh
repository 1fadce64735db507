#!/usr/bin/env bash
# Builds pepper's real workloads (bzip2, Lua, SQLite, zstd) to wasm32-wasi from the C sources
# carried by crates.io source crates, with Debian's clang, lld and wasi-libc.
#
#   bench/workloads/build.sh          installs what is missing (apt), vendors sources, builds
#
# Output: bench/workloads/build/{bzip2,lua,sqlite,zstd}.wasm, lua-phases.wasm and
# sqlite-phases.wasm (the same libraries run in phases), {zlib,xz,pcre2,expat,tree-sitter-c,
# monocypher}.wasm, deflate-p2.component.wasm (a Rust program built as a component),
# http-hash.component.wasm (a wasi:http/proxy component, for `pepper serve`), and
# deterministic inputs.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/build"
VENDOR="$HERE/vendor"
mkdir -p "$OUT/obj"

need_install=0
command -v clang >/dev/null || need_install=1
command -v wasm-ld >/dev/null || [ -x /usr/lib/llvm-14/bin/wasm-ld ] || need_install=1
[ -f /usr/lib/wasm32-wasi/libc.a ] || need_install=1
ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || need_install=1
if [ "$need_install" = 1 ]; then
  echo "workloads: installing clang, lld, wasi-libc, libclang-rt-dev-wasm32 (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq clang lld wasi-libc libclang-rt-dev-wasm32 >/dev/null
fi

# Vendored again whenever sources.toml changes (its hash is kept beside the sources).
stamp="$(sha256sum "$HERE/sources.toml" | cut -d' ' -f1)"
if [ ! -f "$VENDOR/.sources-sha256" ] || [ "$(cat "$VENDOR/.sources-sha256")" != "$stamp" ]; then
  echo "workloads: fetching C sources from crates.io source crates (cargo vendor)" >&2
  rm -rf "$VENDOR" "$VENDOR.tmp"
  tmp="$(mktemp -d)"
  cp "$HERE/sources.toml" "$tmp/Cargo.toml"
  touch "$tmp/lib.rs"
  (cd "$tmp" && cargo vendor --quiet --versioned-dirs "$VENDOR.tmp" >/dev/null)
  mv "$VENDOR.tmp" "$VENDOR"
  echo "$stamp" > "$VENDOR/.sources-sha256"
  rm -rf "$tmp"
fi

RES="$(clang -print-resource-dir)"
# -nostdinc: Debian's clang would otherwise also search the host's /usr/include.
CC=(clang --target=wasm32-wasi -nostdinc -isystem /usr/include/wasm32-wasi -isystem "$RES/include" -O2 -g)
LINK=(clang --target=wasm32-wasi)

# compile NAME FLAGS... -- FILES...: objects into $OUT/obj/NAME, two at a time.
compile() {
  local name="$1"; shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  mkdir -p "$OUT/obj/$name"
  printf '%s\n' "$@" | xargs -P 2 -I{} sh -c '
    src="$1"; shift; obj="$OUT_DIR/$(basename "$src" .c).o"
    [ "$obj" -nt "$src" ] || "$@" -c "$src" -o "$obj"' _ {} "${CC[@]}" "${flags[@]}"
}
export OUT_DIR

BZ="$VENDOR/bzip2-sys-0.1.13+1.0.8/bzip2-1.0.8"
OUT_DIR="$OUT/obj/bzip2" compile bzip2 -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -I"$BZ" -- \
  "$BZ"/{blocksort,huffman,crctable,randtable,compress,decompress,bzlib,bzip2}.c "$HERE/stubs/bzip2_stubs.c"
"${LINK[@]}" "$OUT"/obj/bzip2/*.o -lwasi-emulated-signal -lwasi-emulated-process-clocks -o "$OUT/bzip2.wasm"

LUA="$VENDOR/lua-src-551.1.0/lua-5.4.9"
LUA_SRC=()
for f in "$LUA"/*.c; do
  case "$(basename "$f")" in lua.c|luac.c|onelua.c|ltests.c) ;; *) LUA_SRC+=("$f") ;; esac
done
OUT_DIR="$OUT/obj/lua" compile lua "-Dluai_makeseed(L)=0x5eedu" -I"$HERE/stubs" -I"$LUA" -DLUA_USE_C89 -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_SIGNAL -- \
  "${LUA_SRC[@]}" "$HERE/drivers/lua_driver.c"
"${LINK[@]}" "$OUT"/obj/lua/*.o -lwasi-emulated-process-clocks -lwasi-emulated-signal -o "$OUT/lua.wasm"
# lua-phases: the same library with a driver that runs in phases (parse, compute, format).
OUT_DIR="$OUT/obj/lua-phases" compile lua-phases -I"$HERE/stubs" -I"$LUA" -DLUA_USE_C89 -- "$HERE/drivers/lua_phases.c"
"${LINK[@]}" $(ls "$OUT"/obj/lua/*.o | grep -v lua_driver.o) "$OUT"/obj/lua-phases/*.o \
  -lwasi-emulated-process-clocks -lwasi-emulated-signal -o "$OUT/lua-phases.wasm"

SQ="$VENDOR/libsqlite3-sys-0.39.1/sqlite3"
OUT_DIR="$OUT/obj/sqlite" compile sqlite -I"$SQ" -DSQLITE_OS_OTHER=1 -DSQLITE_THREADSAFE=0 -DSQLITE_TEMP_STORE=3 \
  -DSQLITE_OMIT_LOAD_EXTENSION -DLONGDOUBLE_TYPE=double -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID \
  -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -- \
  "$SQ/sqlite3.c" "$SQ/wasm32-wasi-vfs.c" "$HERE/drivers/sqlite_driver.c"
"${LINK[@]}" "$OUT"/obj/sqlite/*.o -lwasi-emulated-mman -lwasi-emulated-getpid -lwasi-emulated-signal \
  -lwasi-emulated-process-clocks -o "$OUT/sqlite.wasm"
# sqlite-phases: inserts, indexed queries, updates, scans, one after another.
OUT_DIR="$OUT/obj/sqlite-phases" compile sqlite-phases -I"$SQ" -- "$HERE/drivers/sqlite_phases.c"
"${LINK[@]}" $(ls "$OUT"/obj/sqlite/*.o | grep -v sqlite_driver.o) "$OUT"/obj/sqlite-phases/*.o \
  -lwasi-emulated-mman -lwasi-emulated-getpid -lwasi-emulated-signal -lwasi-emulated-process-clocks \
  -o "$OUT/sqlite-phases.wasm"

ZS="$VENDOR/zstd-sys-2.1.2+zstd.1.5.7/zstd/lib"
OUT_DIR="$OUT/obj/zstd" compile zstd -I"$ZS" -I"$ZS/common" -DZSTD_DISABLE_ASM -- \
  "$ZS"/common/*.c "$ZS"/compress/*.c "$ZS"/decompress/*.c "$HERE/drivers/zstd_driver.c"
"${LINK[@]}" "$OUT"/obj/zstd/*.o -o "$OUT/zstd.wasm"

# More C programs: zlib, xz (liblzma), PCRE2, Expat, tree-sitter with its C grammar and
# Monocypher. xz, Expat and tree-sitter-c are built with -Os (the last -O flag wins), the
# others with -O2. Their inputs (input-log{,-small}.txt, input-doc.xml, input-code.c) come from
# gen_inputs_c.py.
ZL="$VENDOR/libz-sys-1.1.33/src/zlib"
OUT_DIR="$OUT/obj/zlib" compile zlib -I"$ZL" -- \
  "$ZL"/{adler32,compress,crc32,deflate,infback,inffast,inflate,inftrees,trees,uncompr,zutil}.c \
  "$HERE/drivers/zlib_driver.c"
"${LINK[@]}" "$OUT"/obj/zlib/*.o -o "$OUT/zlib.wasm"

XZ="$VENDOR/lzma-sys-0.1.20/xz-5.2/src"
XZ_SRC=()
for f in "$XZ"/liblzma/{common,lzma,lz,check,delta,rangecoder,simple}/*.c; do
  case "$(basename "$f")" in
    # no threads in wasi-libc: leave out the multi-threaded encoder and the CPU/memory probes
    # (stubs/xz has liblzma's config.h and a signal.h for mythread.h)
    *_small.c|*tablegen.c|stream_encoder_mt.c|outqueue.c|hardware_*.c) ;;
    *) XZ_SRC+=("$f") ;;
  esac
done
XZ_INC=()
for d in api common lzma lz check delta simple rangecoder; do XZ_INC+=(-I"$XZ/liblzma/$d"); done
OUT_DIR="$OUT/obj/xz" compile xz -Os -DHAVE_CONFIG_H -I"$HERE/stubs/xz" "${XZ_INC[@]}" -I"$XZ/common" -- \
  "${XZ_SRC[@]}" "$HERE/drivers/xz_driver.c"
"${LINK[@]}" "$OUT"/obj/xz/*.o -o "$OUT/xz.wasm"

PC="$VENDOR/pcre2-sys-0.2.10/upstream"
PC_SRC=()
for f in "$PC"/src/*.c; do
  # the JIT parts are left out (no JIT on wasm); pcre2_ucptables.c is included by pcre2_tables.c
  case "$(basename "$f")" in pcre2_jit_*.c|pcre2_ucptables.c) ;; *) PC_SRC+=("$f") ;; esac
done
OUT_DIR="$OUT/obj/pcre2" compile pcre2 -DPCRE2_CODE_UNIT_WIDTH=8 -DHAVE_CONFIG_H -DPCRE2_STATIC \
  -DHAVE_STDLIB_H -DHAVE_MEMMOVE -DSTDC_HEADERS -DSUPPORT_PCRE2_8 -DSUPPORT_UNICODE \
  -I"$PC/src" -I"$PC/include" -- "${PC_SRC[@]}" "$HERE/drivers/pcre2_driver.c"
"${LINK[@]}" "$OUT"/obj/pcre2/*.o -o "$OUT/pcre2.wasm"

EX="$VENDOR/expat-sys-2.1.6/expat/lib"
OUT_DIR="$OUT/obj/expat" compile expat -Os -DHAVE_MEMMOVE -DXML_NS -DXML_DTD -DXML_CONTEXT_BYTES=1024 \
  -DBYTEORDER=1234 -I"$EX" -- "$EX"/{xmlparse,xmlrole,xmltok}.c "$HERE/drivers/expat_driver.c"
"${LINK[@]}" "$OUT"/obj/expat/*.o -o "$OUT/expat.wasm"

TS="$VENDOR/tree-sitter-0.27.1"
TSC="$VENDOR/tree-sitter-c-0.24.2/src"
OUT_DIR="$OUT/obj/tree-sitter-c" compile tree-sitter-c -Os -std=c11 -D_POSIX_C_SOURCE=200112L \
  -D_DEFAULT_SOURCE -I"$TS/src" -I"$TS/include" -I"$TSC" -- \
  "$TS/src/lib.c" "$TSC/parser.c" "$HERE/drivers/tree_sitter_c_driver.c"
"${LINK[@]}" "$OUT"/obj/tree-sitter-c/*.o -o "$OUT/tree-sitter-c.wasm"

MC="$VENDOR/monocypher-sys-4.0.2/Monocypher/src"
OUT_DIR="$OUT/obj/monocypher" compile monocypher -I"$MC" -I"$MC/optional" -- \
  "$MC/monocypher.c" "$MC/optional/monocypher-ed25519.c" "$HERE/drivers/monocypher_driver.c"
"${LINK[@]}" "$OUT"/obj/monocypher/*.o -o "$OUT/monocypher.wasm"

python3 "$HERE/gen_inputs_c.py" "$OUT"

# deflate-p2: miniz_oxide built as a component from the start (Rust's wasm32-wasip2 links
# a wasi:cli/command component); the target comes from rustup.
if command -v rustup >/dev/null && rustup target add wasm32-wasip2 >/dev/null 2>&1; then
  cargo build --quiet --release --target wasm32-wasip2 --manifest-path "$HERE/rust/Cargo.toml" \
    --target-dir "$OUT/rust"
  cp "$OUT/rust/wasm32-wasip2/release/deflate-p2.wasm" "$OUT/deflate-p2.component.wasm"
else
  echo "workloads: no rustup wasm32-wasip2 target: deflate-p2 (a component) not built" >&2
fi

# http-hash: a wasi:http/proxy component (exports wasi:http/incoming-handler) for `pepper
# serve`; `GET /hash?n=N` hashes N rounds. A cdylib, linked into a component by wasm32-wasip2.
if command -v rustup >/dev/null && rustup target add wasm32-wasip2 >/dev/null 2>&1; then
  cargo build --quiet --release --target wasm32-wasip2 --manifest-path "$HERE/rust-http/Cargo.toml" \
    --target-dir "$OUT/rust-http"
  cp "$OUT/rust-http/wasm32-wasip2/release/http_hash.wasm" "$OUT/http-hash.component.wasm"
else
  echo "workloads: no rustup wasm32-wasip2 target: http-hash (a wasi:http component) not built" >&2
fi

python3 "$HERE/gen_input.py" "$OUT/input-small.txt" 300000
python3 "$HERE/gen_input.py" "$OUT/input-bench.txt" 3000000

# The rest of the corpus, one script per toolchain family (each lists its programs in
# corpus/FAMILY.toml). Each gets the build directory and may install what it needs.
for family in "$HERE"/families/*.sh; do
  [ -e "$family" ] || continue
  OUT="$OUT" VENDOR="$VENDOR" bash "$family"
done
ls -la "$OUT"/*.wasm >&2
