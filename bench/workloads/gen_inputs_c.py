"""Writes the deterministic inputs of the C programs pcre2, expat and tree-sitter-c into DIR.

    python3 gen_inputs_c.py DIR

  input-log.txt   ~2 MB of server-log lines (dates, addresses, e-mails, paths, key=value), for pcre2
  input-log-small.txt  its first ~200 KB (whole lines), for pcre2's short runs
  input-doc.xml   ~2 MB XML catalogue (namespaces, attributes, entities, CDATA, comments), for expat
  input-code.c    ~300 KB of generated C (structs, enums, macros, functions, loops, switches),
                  for tree-sitter-c

A fixed linear congruential generator drives everything (not Python's `random`, whose
algorithms may change between versions), so the files are the same on every machine.
Files that already exist with the right content are left alone.
"""
import hashlib
import os
import sys


class Lcg:
    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % 2**64
        return self.s >> 33

    def below(self, n):
        return self.next() % n

    def pick(self, xs):
        return xs[self.below(len(xs))]


WORDS = ["pepper", "path", "edge", "profile", "wasm", "loop", "header", "branch", "sample",
         "register", "counter", "yield", "module", "table", "memory", "global", "import",
         "export", "stack", "frame", "trap", "label", "block", "value", "index", "offset"]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
         "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter"]
DOMAINS = ["example.com", "example.org", "mail.test", "corp.example.net", "uni.example.edu"]
LEVELS = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE", "PATCH"]


def gen_log(n):
    r = Lcg(2024)
    out, size = [], 0
    t = 1_700_000_000
    while size < n:
        t += r.below(5)
        day, rem = divmod(t - 1_700_000_000, 86400)
        h, rem = divmod(rem, 3600)
        mi, s = divmod(rem, 60)
        user = r.pick(USERS)
        path = "/" + "/".join(r.pick(WORDS) for _ in range(1 + r.below(3)))
        if r.below(3) == 0:
            path += "/%d" % r.below(100000)
        line = "2023-%02d-%02d %02d:%02d:%02d.%03d %-5s [%s] %s %s status=%d bytes=%d took=%dms " % (
            11 + day // 30 % 2, 1 + day % 28, h, mi, s, r.below(1000), r.pick(LEVELS),
            "10.%d.%d.%d" % (r.below(256), r.below(256), r.below(256)), r.pick(METHODS), path,
            r.pick([200, 200, 200, 201, 204, 301, 304, 400, 403, 404, 500, 503]),
            r.below(1 << 20), r.below(2000))
        line += "user=%s%s@%s" % (user, "" if r.below(2) else str(r.below(100)), r.pick(DOMAINS))
        if r.below(4) == 0:
            line += ' msg="%s"' % " ".join(r.pick(WORDS) for _ in range(2 + r.below(6)))
        if r.below(7) == 0:
            line += " trace=%016x" % (r.next() << 16 | r.below(65536))
        if r.below(11) == 0:
            line += " note=caf\u00e9-na\u00efve-\u00fcber"
        out.append(line + "\n")
        size += len(line.encode()) + 1
    return "".join(out)


def gen_xml(n):
    r = Lcg(77)
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           '<!DOCTYPE catalog [\n  <!ENTITY vendor "Pepper &amp; Sons">\n'
           '  <!ATTLIST item kind CDATA "plain">\n]>\n',
           '<catalog xmlns="urn:example:catalog" xmlns:m="urn:example:meta" version="3">\n']
    size = sum(len(x) for x in out)
    i = 0
    while size < n:
        i += 1
        parts = ['  <item id="i%d" price="%d.%02d"%s>\n' % (
            i, r.below(1000), r.below(100), ' kind="bulk"' if r.below(3) == 0 else "")]
        parts.append("    <name>%s %s</name>\n" % (r.pick(WORDS).title(), r.pick(WORDS)))
        parts.append('    <m:tags count="%d">' % (k := 1 + r.below(5)))
        parts.append("".join("<m:tag>%s</m:tag>" % r.pick(WORDS) for _ in range(k)))
        parts.append("</m:tags>\n")
        text = " ".join(r.pick(WORDS) for _ in range(5 + r.below(25)))
        if r.below(4) == 0:
            text += " &lt;%s&gt; &amp; &vendor; &#169;" % r.pick(WORDS)
        parts.append("    <description lang=\"%s\">%s</description>\n" % (r.pick(["en", "fr", "de"]), text))
        if r.below(5) == 0:
            parts.append("    <![CDATA[raw <%s> & %d]]>\n" % (r.pick(WORDS), r.below(10**6)))
        if r.below(6) == 0:
            parts.append("    <!-- %s -->\n" % r.pick(WORDS))
        if r.below(8) == 0:
            parts.append("    <?render mode=\"%s\"?>\n" % r.pick(WORDS))
        parts.append("    <stock>")
        for _ in range(r.below(4)):
            parts.append('<shelf row="%d" col="%d" qty="%d"/>' % (r.below(50), r.below(20), r.below(500)))
        parts.append("</stock>\n  </item>\n")
        s = "".join(parts)
        out.append(s)
        size += len(s)
    out.append("</catalog>\n")
    return "".join(out)


TYPES = ["int", "long", "unsigned", "double", "char *", "size_t", "struct node *", "uint32_t"]
OPS = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "&&", "||", "==", "!=", "<", ">="]


def gen_c(n):
    r = Lcg(4242)
    out = ["/* generated for the tree-sitter-c workload */\n", "#include <stdint.h>\n",
           "#include <stddef.h>\n\n", "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
           "#define FIELD(s, f) ((s)->f)\n\n",
           "struct node { int key; long weight; struct node *next, *child; char *name; };\n\n"]
    size = sum(len(x) for x in out)
    fn = 0

    def name():
        return r.pick(WORDS) + "_" + str(r.below(40))

    def expr(d):
        k = r.below(9 if d < 3 else 3)
        if k == 0:
            return str(r.below(1000))
        if k == 1:
            return name()
        if k == 2:
            return "%s->%s" % (name(), r.pick(["key", "weight", "next", "name"]))
        if k in (3, 4, 5):
            return "%s %s %s" % (expr(d + 1), r.pick(OPS), expr(d + 1))
        if k == 6:
            return "(%s)" % expr(d + 1)
        if k == 7:
            return "f%d(%s)" % (r.below(max(fn, 1)), ", ".join(expr(d + 1) for _ in range(r.below(3))))
        return "%s ? %s : %s" % (expr(d + 1), expr(d + 1), expr(d + 1))

    def stmt(d, ind):
        p = "    " * ind
        k = r.below(10 if d < 3 else 4)
        if k == 0:
            return "%s%s %s = %s;\n" % (p, r.pick(TYPES), name(), expr(0))
        if k in (1, 2):
            return "%s%s %s= %s;\n" % (p, name(), r.pick(["", "+", "-", "*", "|"]), expr(0))
        if k == 3:
            return "%sreturn %s;\n" % (p, expr(0))
        if k == 4:
            s = "%sif (%s) {\n%s%s}" % (p, expr(0), body(d + 1, ind + 1), p)
            if r.below(2):
                s += " else {\n%s%s}" % (body(d + 1, ind + 1), p)
            return s + "\n"
        if k == 5:
            v = name()
            return "%sfor (int %s = 0; %s < %s; %s++) {\n%s%s}\n" % (
                p, v, v, expr(1), v, body(d + 1, ind + 1), p)
        if k == 6:
            return "%swhile (%s) {\n%s%s}\n" % (p, expr(0), body(d + 1, ind + 1), p)
        if k == 7:
            cases = "".join("%s  case %d:\n%s%s    break;\n" % (p, c, body(d + 1, ind + 1), p)
                            for c in range(1 + r.below(5)))
            return "%sswitch (%s) {\n%s%s  default:\n%s    break;\n%s}\n" % (p, expr(0), cases, p, p, p)
        if k == 8:
            return "%sdo {\n%s%s} while (%s);\n" % (p, body(d + 1, ind + 1), p, expr(0))
        return "%s%s[%s] = (%s)%s;\n" % (p, name(), expr(1), r.pick(TYPES), expr(0))

    def body(d, ind):
        return "".join(stmt(d, ind) for _ in range(1 + r.below(4)))

    while size < n:
        k = r.below(10)
        if k == 0:
            fields = "".join("    %s %s;\n" % (r.pick(TYPES), name()) for _ in range(2 + r.below(5)))
            s = "typedef struct s%d {\n%s} s%d_t;\n\n" % (fn, fields, fn)
        elif k == 1:
            s = "enum e%d { %s };\n\n" % (fn, ", ".join("E%d_%d = %d" % (fn, j, j * 3) for j in range(2 + r.below(6))))
        elif k == 2:
            s = "#if defined(FEATURE_%d)\nstatic const int k%d = %s;\n#else\n#define K%d %d\n#endif\n\n" % (
                fn, fn, expr(1), fn, r.below(100))
        else:
            params = ", ".join("%s %s" % (r.pick(TYPES), name()) for _ in range(r.below(4))) or "void"
            s = "static %s f%d(%s) {\n%s}\n\n" % (r.pick(TYPES), fn, params, body(0, 1))
            fn += 1
        out.append(s)
        size += len(s)
    return "".join(out)


def write(path, text):
    data = text.encode()
    if os.path.exists(path):
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest():
                return
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    d = sys.argv[1]
    log = gen_log(2_000_000)
    write(os.path.join(d, "input-log.txt"), log)
    write(os.path.join(d, "input-log-small.txt"), log[:log.index("\n", 200_000) + 1])
    write(os.path.join(d, "input-doc.xml"), gen_xml(2_000_000))
    write(os.path.join(d, "input-code.c"), gen_c(300_000))
