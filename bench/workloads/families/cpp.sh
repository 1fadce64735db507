#!/usr/bin/env bash
# C++ programs of the corpus (corpus/cpp.toml): drivers in ../cpp around header-only template
# libraries from Debian 12 (Eigen, nlohmann/json) and libc++'s own templates (std::regex,
# containers), compiled with Debian's clang 14 for wasm32-wasi against Debian's libc++ for
# WASI (libc++-dev-wasm32), without exceptions.
#
#   OUT=bench/workloads/build bash bench/workloads/families/cpp.sh    (build.sh runs it)
#
# Output: $OUT/{eigen-linalg,nlohmann-json,cxx-regex}.wasm; objects in $OUT/obj/cpp.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$HERE/build}"
WORK="$OUT/obj/cpp"
mkdir -p "$WORK"

# Debian 12's clang toolchain for WASI (as ../build.sh installs it), and the C++ libraries,
# pinned to the versions the programs were written against (if Debian no longer serves a
# pinned version, its current one is installed, with a warning, and accepted from then on).
TOOLS=(clang lld wasi-libc libclang-rt-dev-wasm32)
PKGS=(
  libc++-dev-wasm32=1:14.0-55.7~deb12u1
  libc++abi-14-dev-wasm32=1:14.0.6-12
  libeigen3-dev=3.4.0-4
  nlohmann-json3-dev=3.11.2-2
)
missing=()
for p in "${TOOLS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
for p in "${PKGS[@]}"; do
  have="$(dpkg-query -W -f='${Version}' "${p%%=*}" 2>/dev/null || true)"
  [ "$have" = "${p#*=}" ] || grep -qxF "${p%%=*}=$have" "$WORK/apt-accepted" 2>/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "cpp: installing ${missing[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if ! apt-get install -y -qq "${missing[@]}" >/dev/null; then
    echo "cpp: warning: pinned versions not available, installing Debian's current ones" >&2
    apt-get install -y -qq "${missing[@]%%=*}" >/dev/null
    for p in "${PKGS[@]%%=*}"; do echo "$p=$(dpkg-query -W -f='${Version}' "$p")"; done > "$WORK/apt-accepted"
  fi
fi

RES="$(clang -print-resource-dir)"
# -nostdinc: only the WASI sysroot's headers (libc++, wasi-libc, clang's own), never the
# host's /usr/include; nlohmann/ is reached through a symlink so that /usr/include is not
# searched. A 1 MiB stack: Eigen keeps its GEMM blocks on the stack (wasm-ld's default is 64 KiB).
mkdir -p "$WORK/include"
ln -sfn /usr/include/nlohmann "$WORK/include/nlohmann"
CXX=(clang++ --target=wasm32-wasi -fno-exceptions -std=c++17 -nostdinc
  -isystem /usr/include/wasm32-wasi/c++/v1 -isystem "$RES/include" -isystem /usr/include/wasm32-wasi
  -O2 -Wl,-z,stack-size=1048576)

# build NAME SOURCE FLAGS...: rebuilt when the source, this script or the flags change.
build() {
  local name="$1" src="$2"; shift 2
  local target="$OUT/$name.wasm"
  local stamp
  stamp="$( (cat "$src" "$0"; printf '%s\n' "${CXX[@]}" "$@"; dpkg-query -W "${PKGS[@]%%=*}") | sha256sum | cut -d' ' -f1)"
  if [ -f "$target" ] && [ "$(cat "$WORK/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  echo "cpp: building $name.wasm (clang++ -O2, libc++ for wasm32-wasi)" >&2
  "${CXX[@]}" "$@" "$src" -o "$target.tmp"
  mv "$target.tmp" "$target"
  echo "$stamp" > "$WORK/$name.stamp"
}

build eigen-linalg "$HERE/cpp/eigen_bench.cpp" -isystem /usr/include/eigen3 -DEIGEN_DONT_PARALLELIZE
build nlohmann-json "$HERE/cpp/json_bench.cpp" -isystem "$WORK/include" -DJSON_HAS_FILESYSTEM=0 -DJSON_HAS_EXPERIMENTAL_FILESYSTEM=0
build cxx-regex "$HERE/cpp/regex_bench.cpp"
