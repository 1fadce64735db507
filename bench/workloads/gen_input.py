"""Writes a deterministic, moderately compressible text file of N bytes (for bzip2)."""
import sys

n = int(sys.argv[2])
words = ["pepper", "path", "edge", "profile", "wasm", "loop", "header", "branch", "sample",
         "the", "of", "and", "a", "to", "in", "register", "counter", "yieldpoint"]
seed = 12345
out = []
size = 0
while size < n:
    seed = (seed * 1103515245 + 12345) % 2**31
    w = words[(seed >> 16) % len(words)]
    sep = "\n" if (seed >> 8) % 13 == 0 else " "
    out.append(w + sep)
    size += len(w) + 1
with open(sys.argv[1], "w") as f:
    f.write("".join(out)[:n])
