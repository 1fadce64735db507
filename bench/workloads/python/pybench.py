"""A pure-Python workload for CPython inside a wasi:cli/command component.

Run as `pybench N`: N rounds of four parts, each from its own deterministic generator
(no time, no OS randomness, no dependence on str hashing order):
  1. a tokenizer (re), a recursive-descent parser and a tree-walking interpreter for a
     small language of integer expressions, assignments and loops;
  2. JSON: generated records encoded with sorted keys, decoded and aggregated;
  3. text: regex word splitting, Counter, heapq, bisect and zlib over a generated text;
  4. exact arithmetic with fractions and decimal.
Prints one digest per part and a final SHA-256 prefix.
"""
import bisect
import collections
import decimal
import fractions
import hashlib
import heapq
import json
import re
import sys
import zlib

from wit_world import exports


class Lcg:
    def __init__(self, seed):
        self.s = seed & 0x7FFFFFFF

    def next(self, n):
        self.s = (self.s * 1103515245 + 12345) & 0x7FFFFFFF
        return (self.s >> 8) % n


# ---- part 1: a little language ------------------------------------------------------

TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<name>[a-z_][a-z_0-9]*)|(?P<op>==|!=|<=|>=|[-+*/%()<>{};=]))"
)
KEYWORDS = {"let", "repeat", "if", "else", "print"}


def tokenize(src):
    pos, out, n = 0, [], len(src)
    while pos < n:
        m = TOKEN.match(src, pos)
        if not m:
            if src[pos:].strip() == "":
                break
            raise SyntaxError(f"bad input at {pos}")
        pos = m.end()
        kind = m.lastgroup
        text = m.group(kind)
        if kind == "name" and text in KEYWORDS:
            kind = text
        out.append((kind, text))
    out.append(("eof", ""))
    return out


class Parser:
    def __init__(self, toks):
        self.toks, self.i = toks, 0

    def peek(self):
        return self.toks[self.i]

    def take(self, kind=None, text=None):
        k, t = self.toks[self.i]
        if (kind and k != kind) or (text and t != text):
            raise SyntaxError(f"expected {kind or text}, got {t!r}")
        self.i += 1
        return t

    def program(self):
        body = []
        while self.peek()[0] != "eof":
            body.append(self.statement())
        return ("block", body)

    def block(self):
        self.take(text="{")
        body = []
        while self.peek()[1] != "}":
            body.append(self.statement())
        self.take(text="}")
        return ("block", body)

    def statement(self):
        k = self.peek()[0]
        if k == "let":
            self.take()
            name = self.take("name")
            self.take(text="=")
            e = self.expr()
            self.take(text=";")
            return ("let", name, e)
        if k == "repeat":
            self.take()
            n = self.expr()
            return ("repeat", n, self.block())
        if k == "if":
            self.take()
            c = self.expr()
            then = self.block()
            other = ("block", [])
            if self.peek()[0] == "else":
                self.take()
                other = self.block()
            return ("if", c, then, other)
        if k == "print":
            self.take()
            e = self.expr()
            self.take(text=";")
            return ("print", e)
        raise SyntaxError(f"unexpected {self.peek()!r}")

    def expr(self):
        left = self.arith()
        while self.peek()[1] in ("==", "!=", "<", ">", "<=", ">="):
            op = self.take()
            left = ("bin", op, left, self.arith())
        return left

    def arith(self):
        left = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()
            left = ("bin", op, left, self.term())
        return left

    def term(self):
        left = self.unary()
        while self.peek()[1] in ("*", "/", "%"):
            op = self.take()
            left = ("bin", op, left, self.unary())
        return left

    def unary(self):
        if self.peek()[1] == "-":
            self.take()
            return ("neg", self.unary())
        k, t = self.peek()
        if k == "num":
            self.take()
            return ("num", int(t))
        if k == "name":
            self.take()
            return ("var", t)
        self.take(text="(")
        e = self.expr()
        self.take(text=")")
        return e


def _div(a, b):
    return a // b if b else 0


def _mod(a, b):
    return a % b if b else 0


BINOPS = {
    "+": lambda a, b: (a + b) & 0xFFFFFFFF,
    "-": lambda a, b: (a - b) & 0xFFFFFFFF,
    "*": lambda a, b: (a * b) & 0xFFFFFFFF,
    "/": _div,
    "%": _mod,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
}


class Interp:
    def __init__(self):
        self.env = {}
        self.out = []
        self.steps = 0

    def eval(self, e):
        k = e[0]
        if k == "num":
            return e[1]
        if k == "var":
            return self.env.get(e[1], 0)
        if k == "bin":
            return BINOPS[e[1]](self.eval(e[2]), self.eval(e[3]))
        return (-self.eval(e[1])) & 0xFFFFFFFF

    def exec(self, s):
        self.steps += 1
        k = s[0]
        if k == "block":
            for t in s[1]:
                self.exec(t)
        elif k == "let":
            self.env[s[1]] = self.eval(s[2])
        elif k == "repeat":
            for _ in range(self.eval(s[1]) % 16):
                self.exec(s[2])
        elif k == "if":
            self.exec(s[2] if self.eval(s[1]) else s[3])
        else:
            self.out.append(self.eval(s[1]))


VARS = ["a", "b", "c", "d", "acc", "n", "x_1", "y_2"]


def gen_expr(r, depth):
    c = r.next(10)
    if depth <= 0 or c < 3:
        return str(r.next(1000)) if r.next(2) else VARS[r.next(len(VARS))]
    if c == 3:
        return "-" + gen_expr(r, depth - 1)
    if c == 4:
        return "(" + gen_expr(r, depth - 1) + ")"
    ops = ["+", "-", "*", "/", "%", "==", "<", ">=", "!=", "+"]
    return gen_expr(r, depth - 1) + " " + ops[r.next(len(ops))] + " " + gen_expr(r, depth - 1)


def gen_stmt(r, depth, lines, indent):
    c = r.next(12)
    pad = "  " * indent
    if depth > 0 and c == 0:
        lines.append(f"{pad}repeat {r.next(9) + 2} {{")
        for _ in range(r.next(4) + 1):
            gen_stmt(r, depth - 1, lines, indent + 1)
        lines.append(pad + "}")
    elif depth > 0 and c == 1:
        lines.append(f"{pad}if {gen_expr(r, 2)} {{")
        gen_stmt(r, depth - 1, lines, indent + 1)
        lines.append(pad + "} else {")
        gen_stmt(r, depth - 1, lines, indent + 1)
        lines.append(pad + "}")
    elif c == 2:
        lines.append(f"{pad}print {gen_expr(r, 3)};")
    else:
        lines.append(f"{pad}let {VARS[r.next(len(VARS))]} = {gen_expr(r, 4)};")


def part_lang(seed):
    r = Lcg(seed)
    lines = []
    for _ in range(150):
        gen_stmt(r, 3, lines, 0)
    src = "\n".join(lines)
    toks = tokenize(src)
    tree = Parser(toks).program()
    it = Interp()
    for k in range(30):
        it.env["n"] = k
        it.exec(tree)
    h = zlib.crc32(" ".join(map(str, it.out)).encode())
    for name in sorted(it.env):
        h = zlib.crc32(f"{name}={it.env[name]}".encode(), h)
    return h ^ len(toks) ^ (it.steps << 1)


# ---- part 2: JSON ---------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau"]


def part_json(seed):
    r = Lcg(seed)
    records = []
    for i in range(400):
        records.append({
            "id": i,
            "name": WORDS[r.next(len(WORDS))] + "-" + str(r.next(10000)),
            "score": r.next(100000) / 100.0,
            "tags": [WORDS[r.next(len(WORDS))] for _ in range(r.next(5))],
            "nested": {"depth": r.next(8), "ok": bool(r.next(2)), "note": None,
                       "text": "caf\u00e9 \"quoted\" \\ line\n" * r.next(3)},
        })
    text = json.dumps({"records": records, "count": len(records)}, sort_keys=True, indent=1)
    doc = json.loads(text)
    by_tag = collections.defaultdict(float)
    for rec in doc["records"]:
        for t in rec["tags"]:
            by_tag[t] += rec["score"]
    compact = json.dumps(sorted(by_tag.items()), separators=(",", ":"))
    return zlib.crc32(text.encode()) ^ zlib.crc32(compact.encode()) ^ len(text)


# ---- part 3: text ---------------------------------------------------------------------

WORD_RE = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
NUM_RE = re.compile(r"\b\d+(?:\.\d+)?\b")


def part_text(seed):
    r = Lcg(seed)
    parts = []
    for _ in range(6000):
        w = WORDS[r.next(len(WORDS))]
        c = r.next(20)
        if c == 0:
            w = w.capitalize() + "."
        elif c == 1:
            w = str(r.next(5000)) + "." + str(r.next(100))
        elif c == 2:
            w = w + "'s,"
        parts.append(w)
    text = " ".join(parts)
    words = [w.lower() for w in WORD_RE.findall(text)]
    counts = collections.Counter(words)
    top = heapq.nlargest(8, counts.items(), key=lambda kv: (kv[1], kv[0]))
    nums = sorted(float(x) for x in NUM_RE.findall(text))
    median = nums[len(nums) // 2] if nums else 0.0
    rank = bisect.bisect_left(nums, 2500.0)
    bigrams = collections.Counter(zip(words, words[1:]))
    best = max(bigrams.items(), key=lambda kv: (kv[1], kv[0]))
    packed = zlib.compress(text.encode(), 6)
    summary = f"{top}|{median}|{rank}|{best}|{len(packed)}"
    return zlib.crc32(summary.encode()) ^ zlib.adler32(packed)


# ---- part 4: exact arithmetic ---------------------------------------------------------

def part_exact(seed):
    r = Lcg(seed)
    f = fractions.Fraction(0)
    for k in range(1, 300):
        f += fractions.Fraction(r.next(50) - 25, k * (r.next(7) + 1))
    ctx = decimal.Context(prec=40)
    d = decimal.Decimal(1)
    for k in range(1, 600):
        d = ctx.add(d, ctx.divide(decimal.Decimal(r.next(1000) + 1), decimal.Decimal(k * k)))
    root = ctx.sqrt(d)
    return zlib.crc32(f"{f.numerator}/{f.denominator} {root}".encode())


def main(args):
    rounds = int(args[-1]) if len(args) > 1 and args[-1].isdigit() else 1
    digests = [0, 0, 0, 0]
    parts = [part_lang, part_json, part_text, part_exact]
    for i in range(rounds):
        for j, part in enumerate(parts):
            digests[j] = (digests[j] * 31 + part(1000 * i + 17 * j + 1)) & 0xFFFFFFFF
    for name, d in zip(["lang", "json", "text", "exact"], digests):
        print(f"{name} {d:08x}")
    total = hashlib.sha256(" ".join(f"{d:08x}" for d in digests).encode()).hexdigest()
    print(f"pybench rounds={rounds} sha256={total[:16]}")


class Run(exports.Run):
    def run(self) -> None:
        main(sys.argv)


if __name__ == "__main__":
    main(sys.argv)
