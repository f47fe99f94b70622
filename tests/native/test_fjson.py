"""The front end's JSON tree (fast/fjson.c: yajl parses and writes) as a black box.

Through ``xpu-cdi-fast-test json MODE``, which reads frames
``<byte count>\\n<bytes>`` and answers one line per frame (see
fjson_test.c); many documents go through one process run.

What C must accept is RFC 8259 JSON within the documented limits (fjson.h):
the oracle is Python's standard json module with those limits added on top
(:func:`reference`): no NaN/Infinity, no duplicate keys, integers within
[-2**63, 2**64), reals within a double, no lone surrogate escapes, at most
FJ_MAX_DEPTH levels.  C must refuse every other document with one line
naming the place, and give back every accepted one as the same values in
the same order, numbers spelled as in the source.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MAX_DEPTH = 100  # FJ_MAX_DEPTH
ERR_LINE = re.compile(r"\AERR [^\n]+ at line [0-9]+, column [0-9]+ \(byte [0-9]+\)\Z")

# A plain Random from a drawn seed: every call of a HypothesisRandom is a
# draw of its own, too slow for the hundreds of choices a batch makes.
SEEDED = st.integers(0, 2**32 - 1).map(random.Random)
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def fast(fast_bin: Path) -> Path:
    exe = fast_bin / "xpu-cdi-fast-test"
    assert exe.exists(), f"{exe} is not built (build.py --out DIR xpu-cdi-fast-test; XPU_CDI_FAST_BIN=DIR)"
    return exe


def run(exe: Path, mode: str, frames: Sequence[bytes]) -> List[str]:
    """One output line per frame (or pair of frames) of *mode*."""
    data = b"".join(b"%d\n" % len(f) + f for f in frames)
    out = subprocess.run([str(exe), "json", mode], input=data, capture_output=True, check=True, timeout=60)
    lines = out.stdout.decode("utf-8").split("\n")
    assert lines[-1] == ""
    return lines[:-1]


# -- the oracle --------------------------------------------------------------


class Pairs(list):
    """An object's members in order."""


class Num(str):
    """A number, known by its text (C keeps the spelling)."""


class Refused(ValueError):
    pass


def _pairs(items: List[Tuple[str, Any]]) -> Pairs:
    keys = [k for k, _ in items]
    if len(set(keys)) != len(keys):
        raise Refused("duplicate key")
    return Pairs(items)


def _constant(name: str) -> Any:
    raise Refused(name)


def _integer(text: str) -> Num:
    if not -(2**63) <= int(text) < 2**64:
        raise Refused("integer out of range")
    return Num(text)


def _real(text: str) -> Num:
    if math.isinf(float(text)):
        raise Refused("real out of range")
    return Num(text)


def strict_loads(doc: bytes) -> Any:
    """Python's json with fjson's limits; raises ValueError (or RecursionError)."""
    return json.loads(doc.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_constant,
                      parse_int=_integer, parse_float=_real)


def typed(v: Any) -> Any:
    """*v* with its types spelled out, so 1, "1" and True differ."""
    if isinstance(v, Pairs):
        return ("o", tuple((k, typed(x)) for k, x in v))
    if isinstance(v, list):
        return ("l", tuple(typed(x) for x in v))
    if isinstance(v, Num):
        return ("n", str(v))
    if isinstance(v, bool) or v is None:
        return ("c", v)
    return (type(v).__name__, v)


def depth(v: Any) -> int:
    if isinstance(v, Pairs):
        return 1 + max((depth(x) for _, x in v), default=0)
    if isinstance(v, list):
        return 1 + max((depth(x) for x in v), default=0)
    return 0


def has_surrogate(v: Any) -> bool:
    if isinstance(v, Pairs):
        return any(has_surrogate(k) or has_surrogate(x) for k, x in v)
    if isinstance(v, list):
        return any(has_surrogate(x) for x in v)
    return isinstance(v, str) and not isinstance(v, Num) and any(0xD800 <= ord(c) <= 0xDFFF for c in v)


def reference(doc: bytes) -> Optional[Any]:
    """The typed value C must give back for *doc*, or None when C must refuse it."""
    try:
        value = strict_loads(doc)
    except (ValueError, RecursionError):
        return None
    if has_surrogate(value) or depth(value) > MAX_DEPTH:
        return None
    return typed(value)


def check_parse(exe: Path, docs: Sequence[bytes]) -> int:
    """Assert C's answers on *docs*; return how many C accepted."""
    accepted = 0
    for doc, line in zip(docs, run(exe, "parse", docs), strict=True):
        want = reference(doc)
        if want is None:
            assert ERR_LINE.match(line), (doc[:200], line)
            continue
        assert line.startswith("OK "), (doc[:200], line)
        got = json.loads(line[3:], object_pairs_hook=Pairs, parse_int=Num, parse_float=Num)
        assert typed(got) == want, doc[:200]
        accepted += 1
    return accepted


# -- generated documents -----------------------------------------------------

NUMBERS = st.one_of(
    st.integers().map(str),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?\Z"),
)
# Trees of JSON values; objects are lists of members, so keys may repeat.
TREES = st.recursive(
    st.one_of(st.sampled_from([("lit", "null"), ("lit", "true"), ("lit", "false")]),
              NUMBERS.map(lambda n: ("lit", n)), st.text(max_size=10).map(lambda s: ("str", s))),
    lambda kids: st.one_of(st.lists(kids, max_size=4).map(lambda x: ("arr", x)),
                           st.lists(st.tuples(st.sampled_from(["a", "b", "\u00e9", ""]) | st.text(max_size=6), kids),
                                    max_size=4).map(lambda x: ("obj", x))),
    max_leaves=10)


def spell(rng: random.Random, tree: Any) -> str:
    """JSON text of *tree*: odd spacing, strings with or without \\u escapes."""
    def ws() -> str:
        return "".join(rng.choice(" \t\n\r") for _ in range(rng.choice([0, 0, 0, 1, 2])))

    def string(s: str) -> str:
        return json.dumps(s, ensure_ascii=rng.random() < 0.5)

    def text(node: Any) -> str:
        kind, body = node
        if kind == "lit":
            return ws() + body
        if kind == "str":
            return ws() + string(body)
        if kind == "arr":
            return ws() + "[" + ",".join(text(k) for k in body) + ws() + "]"
        return ws() + "{" + ",".join(ws() + string(k) + ws() + ":" + text(v) for k, v in body) + ws() + "}"

    return text(tree) + ws()


def json_texts(trees: List[Any], rng: random.Random, spellings: int = 3) -> List[str]:
    return [spell(rng, t) for t in trees for _ in range(spellings)]


def mutate(rng: random.Random, doc: bytes) -> bytes:
    """*doc* truncated, or with a byte changed, inserted or deleted."""
    if not doc:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(doc))
    what = rng.randrange(4)
    if what == 0:
        return doc[:i]
    pick = rng.choice([rng.randrange(256), *b'"\\[]{},:-.eE0u \x00\x1f\x7f\xc3\xed\xf4\xff'])
    if what == 1:
        return doc[:i] + bytes([pick]) + doc[i + 1:]
    if what == 2:
        return doc[:i] + bytes([pick]) + doc[i:]
    return doc[:i] + doc[i + 1:]


TOKENS = [b"[", b"]", b"{", b"}", b'"', b":", b",", b"0", b"1", b"-", b".", b"e", b"+", b"\\", b"u", b"d8",
          b"00", b"true", b"null", b"NaN", b"Infinity", b" ", b"\n", b"\xc3\xa9", b"\xc3", b"\xed\xa0\x80",
          b"\xf0\x9f\x98\x80", b"\x00", b"\x1f", b'\\"', b"\\ud83d", b"\\ude00", b"\xef\xbb\xbf"]


# -- parse -------------------------------------------------------------------


@SETTINGS
@given(st.lists(TREES, min_size=15, max_size=15), SEEDED)
def test_generated_documents_round_trip(fast: Path, trees: List[Any], rng: random.Random) -> None:
    raw = [d.encode("utf-8", "surrogatepass") for d in json_texts(trees, rng, 6)]
    assert check_parse(fast, raw) > len(raw) // 3


@SETTINGS
@given(st.lists(TREES, min_size=10, max_size=10), SEEDED)
def test_mutated_documents(fast: Path, trees: List[Any], rng: random.Random) -> None:
    raw = [d.encode("utf-8", "surrogatepass") for d in json_texts(trees, rng)]
    for _ in range(3):
        raw = [mutate(rng, d) for d in raw] + raw
    check_parse(fast, raw)


@SETTINGS
@given(st.lists(st.binary(max_size=24), min_size=100, max_size=100),
       st.lists(st.lists(st.sampled_from(TOKENS), max_size=12).map(b"".join), min_size=200, max_size=200))
def test_random_bytes(fast: Path, blobs: List[bytes], tokens: List[bytes]) -> None:
    check_parse(fast, blobs + tokens)


EXPLICIT = [
    b"", b" ", b"\n\t\r ", b"\x0c1", b"1\x0c", b"\xc2\xa01",
    b"null", b"true", b"false", b"nul", b"True", b"[1,]", b"{,}", b'{"a":1,}', b"[1 2]", b'{"a" 1}', b'{1:1}',
    b"-0", b"-0.0", b"0", b"01", b"-01", b"1.", b".5", b"1e", b"1e+", b"+1", b"1E-5", b"0.0e0", b"-", b"--1",
    b"1e400", b"-1e400", b"1e-400", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
    b"-9223372036854775809", b"18446744073709551616", b"1" * 640, b"-" + b"1" * 640, b"1" * 641,
    b"1" * 5000 + b".5", b"1" * 5000 + b"e-4990", b"[" + b"9" * 700 + b"]",
    b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"[NaN]", b'{"a":-Infinity}', b"nan", b"inf",
    b'"\\ud83d\\ude00"', b'"\\uD83D\\uDE00"', b'"\\ud800"', b'"\\ud800x"', b'"\\ud800\\u0041"', b'"\\udc00"',
    b'"\\ude00\\ud83d"', b'"\\ud800\\ud800"', b'["\\ud83d"]', b'{"\\udfff":1}', b'"\\u0000"', b'"a\\u0000b"',
    b'"\\u00e9"', b'"\\u00E9"', b'"\\/"', b'"\\x"', b'"\\u12"', b'"\\u12g4"', b'"\\', b'"abc', b'"\\"',
    b'"\xc0\xaf"', b'"\xc1\xbf"', b'"\xe0\x80\xaf"', b'"\xf0\x80\x80\xaf"', b'"\xed\xa0\x80"', b'"\xed\xbf\xbf"',
    b'"\xf4\x90\x80\x80"', b'"\xf5\x80\x80\x80"', b'"\xff"', b'"\x80"', b'"\xc3"', b'"\xe2\x82"', b'"\xc3\xa9"',
    b'"\xef\xbf\xbf"', b'"\xf4\x8f\xbf\xbf"', b'"\xed\x9f\xbf"', b'"\xee\x80\x80"', b'"\x7f"',
    b'"\x00"', b'"\x1f"', b'"\t"', b'"\n"', b"\xc3\xa9", b"[\xc3\xa9]",
    b"\xef\xbb\xbf{}", b"\xef\xbb\xbf\"x\"", b"{}\xef\xbb\xbf", b"\x00{}", b"{}\x00", b"{\x00}",
    b'\xff\xfe{\x00}\x00', b'{\x00"\x00a\x00"\x00:\x001\x00}\x00',
    b'{"a":1,"a":2}', b'{"a":1,"b":2,"a":3}', b'{"a":{"x":1},"a":[]}', b'{"":0}', b'{"a\\u0000":1,"a":2}',
    b"[[[]]]", b"[{}, {\"a\": [ ] }]", b"{} {}", b"[] x", b"[]]", b"[[]",
    b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
    b'{"a":' * MAX_DEPTH + b"1" + b"}" * MAX_DEPTH, b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
    b"[" * 100_000 + b"]" * 100_000, b"[" * 10_000_000,
]


def test_explicit_cases(fast: Path) -> None:
    check_parse(fast, EXPLICIT)


REFUSED = [
    (b"", "premature EOF at line 1, column 1 (byte 0)"),
    (b"[1,]", "unallowed token at this point in JSON text at line 1, column 5 (byte 4)"),
    (b'{"a":1} x', "trailing garbage at line 1, column 10 (byte 9)"),
    (b'{"a":\n 1,\n "b" 2}', "object key and value must be separated by a colon (':') at line 3, column 7 (byte 16)"),
    (b'{"a":1,\n "a":2}', 'duplicate key "a" at line 2, column 5 (byte 12)'),
    (b'{"x\\n":1,"x\\u000a":2}', 'duplicate key "x?" at line 1, column 19 (byte 18)'),
    (b'[{"k":1,"b":2},{"a":1,"b":2,"a":3}]', 'duplicate key "a" at line 1, column 32 (byte 31)'),
    (b"{" + b",".join(b'"k%d":1' % (i % 40) for i in range(50)) + b"}",
     'duplicate key "k0" at line 1, column 382 (byte 381)'),
    (b"18446744073709551616", "an integer out of the 64-bit range at line 1, column 21 (byte 20)"),
    (b"[-9223372036854775809]", "an integer out of the 64-bit range at line 1, column 22 (byte 21)"),
    (b"[1e400]", "a number out of the range of a double at line 1, column 7 (byte 6)"),
    (b"NaN", "invalid char in json text at line 1, column 2 (byte 1)"),
    (b'"\xed\xa0\x80"', "invalid UTF-8 in a string at line 1, column 6 (byte 5)"),
    (b'"\xc0\xaf"', "invalid UTF-8 in a string at line 1, column 5 (byte 4)"),
    (b'["ok", "\\ud800"]', "a \\u escape of a lone surrogate at line 1, column 9 (byte 8)"),
    (b'"\\udc00\\ud83d"', "a \\u escape of a lone surrogate at line 1, column 2 (byte 1)"),
    (b'"\\ud800\\u0041"', "a \\u escape of a lone surrogate at line 1, column 2 (byte 1)"),
    (b"[" * (MAX_DEPTH + 1), "nested deeper than 100 levels at line 1, column 102 (byte 101)"),
    (b"\xef\xbb\xbf{}", "invalid char in json text at line 1, column 2 (byte 1)"),
    (b"[1,\x0c2]", "a form feed or vertical tab, which JSON does not allow, at line 1, column 4 (byte 3)"),
    (b'{"a": "tab\tinside"}', "invalid character inside string at line 1, column 11 (byte 10)"),
]


@pytest.mark.parametrize("doc, line", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_refused_with_one_line(fast: Path, doc: bytes, line: str) -> None:
    """Each refusal says what is wrong and where: line, column and byte."""
    assert reference(doc) is None
    assert run(fast, "parse", [doc]) == ["ERR " + line]


def test_limits_kept(fast: Path) -> None:
    """Just inside every limit is accepted, as written."""
    kept = [b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, b"18446744073709551615", b"-9223372036854775808",
            b'"\\ud800\\udc00"', b"1e308", b"-0", b"1e-400", b'"a\\\\ud800"', b'{"a\\u0000":1,"a":2}']
    assert all(line.startswith("OK ") for line in run(fast, "parse", kept))
    assert run(fast, "parse", [b" [18446744073709551615, -0 , 1E+2,2.50] "]) == [
        "OK [18446744073709551615,-0,1E+2,2.50]"]


def test_outputs(fast: Path) -> None:
    """Compact output, numbers spelled as in the source, strings escaped as yajl does
    (quote, backslash, control characters; UTF-8 as is; '/' not escaped)."""
    docs = [b' { "a" : [ 1 , 2.50 , -0 , 1E+2, "\\u00E9\\/" ] , "b" : { } , "c" : true } ',
            b'"\xc3\xa9\\ud83d\\ude00"', b'"\\u0000\\u001f\\t\\n\\"\\\\\x7f"']
    assert run(fast, "parse", docs) == [
        'OK {"a":[1,2.50,-0,1E+2,"\u00e9/"],"b":{},"c":true}', 'OK "\u00e9\U0001f600"',
        'OK "\\u0000\\u001F\\t\\n\\"\\\\\x7f"']


def config_json(size: int) -> bytes:
    """A config.json of about *size* bytes, like a runtime engine writes it."""
    rng = random.Random(7)
    env = [f"VAR_{i}={'x' * rng.randrange(80)}\u00e9" for i in range(size // 50)]
    mounts = [{"destination": f"/mnt/{i}", "type": "bind", "source": f"/host/{i}", "options": ["rbind", "ro"]}
              for i in range(200)]
    doc = {"ociVersion": "1.0.2", "process": {"terminal": False, "user": {"uid": 0, "gid": 0},
                                              "args": ["sh", "-c", "echo \"hi\"\n"], "env": env,
                                              "cwd": "/", "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576,
                                                                       "soft": 1048576}]},
           "root": {"path": "rootfs", "readonly": True}, "mounts": mounts,
           "annotations": {"cdi.k8s.io/xpu": "kunlunxin.com/xpu=1", "io.kubernetes.cri.sandbox-id": "a" * 64},
           "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}], "cpu": {"shares": 2.5}},
                     "namespaces": [{"type": t} for t in ["pid", "ipc", "uts", "mount", "network"]]}}
    return doc


def test_five_megabyte_config(fast: Path) -> None:
    """Written back as compact json.dumps(ensure_ascii=False) writes it (yajl
    spells control characters in upper-case hex, none occur here)."""
    doc = config_json(5 << 20)
    compact = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    assert len(compact) > 5 << 20
    spaced = json.dumps(doc, ensure_ascii=True, indent="\t").encode()
    assert run(fast, "parse", [spaced, compact.encode()]) == ["OK " + compact] * 2


def test_unsigned_64_bit_round_trip(fast: Path) -> None:
    """config.json's RLIM_INFINITY rlimits (Go's uint64(-1)) come back exactly."""
    doc = b'{"process":{"rlimits":[{"type":"RLIMIT_MEMLOCK","hard":18446744073709551615,"soft":18446744073709551615}]}}'
    assert run(fast, "parse", [doc]) == ["OK " + doc.decode()]


# -- fj_get / fj_str ---------------------------------------------------------


def test_get_and_str(fast: Path) -> None:
    doc = b'{"a":"\\u00e9","b":"x","n":"a\\u0000b","c":{"a":2},"":[]}'
    keys = [b"a", b"b", b"n", b"c", b"", b"z", b"A"]
    assert run(fast, "get", [f for k in keys for f in (doc, k)]) == [
        'STR "\u00e9"', 'STR "x"', 'OK "a\\u0000b"', 'OK {"a":2}', "OK []", "NONE", "NONE"]
    assert run(fast, "get", [b'["a"]', b"a", b'"a"', b"a"]) == ["NONE", "NONE"]


# -- fj_equal ----------------------------------------------------------------


def respell(rng: random.Random, v: Any) -> Any:
    """JSON text of *v* (Pairs for objects) that Python may or may not see as
    equal: members shuffled, numbers and booleans spelled otherwise, values
    changed now and then."""
    r = rng.random()
    if isinstance(v, Pairs):
        items = list(v)
        rng.shuffle(items)
        if r > 0.95:
            items = items[1:]
        return "{" + ",".join(json.dumps(k) + ":" + respell(rng, x) for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ",".join(respell(rng, x) for x in v) + "]"
    if v is True or v is False:
        return rng.choice([json.dumps(v), str(int(v)), f"{int(v)}.0", "-0" if not v else "1e0"])
    if isinstance(v, int):
        return rng.choice([str(v), f"{v}.0", f"{v}e0", f"{v * 10}e-1", repr(float(v)), str(v + 1)])
    if isinstance(v, float):
        double = v * 2 if abs(v) < 1e300 else v / 2
        return rng.choice([repr(v), repr(v) + "0" if "e" not in repr(v) else repr(v), repr(double)])
    if isinstance(v, str) and r < 0.1:
        return json.dumps(v + "x")
    return json.dumps(v)


def walk_values(v: Any) -> List[Any]:
    if isinstance(v, dict):
        return [y for x in v.values() for y in walk_values(x)]
    if isinstance(v, list):
        return [y for x in v for y in walk_values(x)]
    return [v]


@SETTINGS
@given(st.lists(TREES, min_size=10, max_size=10), SEEDED)
def test_equal_as_python(fast: Path, trees: List[Any], rng: random.Random) -> None:
    frames: List[bytes] = []
    want: List[str] = []
    for doc in json_texts(trees, rng, 15):
        if reference(doc.encode("utf-8", "surrogatepass")) is None:
            continue  # refused: nothing to compare
        v = json.loads(doc, object_pairs_hook=Pairs)
        a = json.loads(doc)
        if any(isinstance(x, float) and math.isinf(x) for x in walk_values(a)):
            continue
        other = respell(rng, v)
        if reference(other.encode("utf-8", "surrogatepass")) is None:
            continue  # respelled out of range (an integer past 2**64)
        frames += [doc.encode(), other.encode()]
        want.append(str(int(a == json.loads(other))))
    assert run(fast, "equal", frames) == want


def test_equal_explicit(fast: Path) -> None:
    pairs = [("1", "1.0"), ("true", "1"), ("false", "0.0"), ("true", "true"), ("null", "0"), ("[]", "{}"),
             ('"1"', "1"), ("-0", "0"), ("-0.0", "0"),
             ("9007199254740993", "9007199254740992.0"), ("9007199254740992", "9007199254740992.0"),
             ("18446744073709551615", "18446744073709551615"), ("18446744073709551615", "1.8446744073709552e19"),
             ("18446744073709551614", "18446744073709551615"), ("9223372036854775807", "9223372036854775808"),
             ("9223372036854775808", "9223372036854775808.0"), ("-9223372036854775808", "-9223372036854775808.0"),
             ("1" * 300 + ".0", "1" * 300 + ".00"), ("0.1", "1e-1"), ("0.30000000000000004", "0.3"),
             ('{"a":1,"b":2}', '{"b":2,"a":1}'), ('{"a":1}', '{"a":1,"b":2}'), ('"\\u00e9"', '"\xc3\xa9"'),
             ('"a\\u0000"', '"a"'), ('[1,[2]]', '[1,[2.0]]'), ('[1,2]', '[2,1]'),
             ('{"k%d":%d}' % (0, 0), '{"k0":0}')]
    big_a = "{" + ",".join(f'"k{i}":{i}' for i in range(100)) + "}"
    big_b = "{" + ",".join(f'"k{i}":{i}' for i in reversed(range(100))) + "}"
    big_c = "{" + ",".join(f'"k{i}":{i if i != 5 else 6}' for i in reversed(range(100))) + "}"
    pairs += [(big_a, big_b), (big_a, big_c), (big_b, big_b), (big_a, big_a + " ")]
    frames = [s.encode("latin-1") if "\xc3" in s else s.encode() for p in pairs for s in p]
    want = [str(int(json.loads(frames[i].decode()) == json.loads(frames[i + 1].decode())))
            for i in range(0, len(frames), 2)]
    assert run(fast, "equal", frames) == want


# -- building, editing, escaping --------------------------------------------

STRINGS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


def yajl_spelling(text: str) -> str:
    """json.dumps(ensure_ascii=False) of *text* as yajl spells it: \\u00XX in upper case."""
    return re.sub(r"\\u00([0-9a-f]{2})", lambda m: "\\u00" + m.group(1).upper(), json.dumps(text, ensure_ascii=False))


def per_byte_replaced(b: bytes) -> str:
    """*b* decoded with each byte outside well-formed UTF-8 as U+FFFD (as Go decodes)."""
    return re.sub("[\udc80-\udcff]", "\ufffd", b.decode("utf-8", "surrogateescape"))


def test_escape_explicit(fast: Path) -> None:
    cases = ['a"b\\c', "\n\r\t\b\f\x01\x1f\x7f", "\u00e9\u20ac\U0001f600\U0010ffff\ufeff", "", "/</script>"]
    raw = [c.encode() for c in cases] + [b"\xff\xc3(\xed\xa0\x80\xc0\xaf"]
    want = [yajl_spelling(c) for c in cases] + ['"\ufffd\ufffd(\ufffd\ufffd\ufffd\ufffd\ufffd"']
    assert run(fast, "escape", raw) == ["OK " + w for w in want]


@SETTINGS
@given(st.lists(STRINGS, min_size=300, max_size=300), st.lists(st.binary(max_size=12), min_size=200, max_size=200))
def test_escape_like_json_dumps(fast: Path, texts: List[str], blobs: List[bytes]) -> None:
    """fj_new_str + fj_write spell a string as json.dumps(ensure_ascii=False) does
    (bytes that are not UTF-8 as U+FFFD, as Go's decoder would read them)."""
    blobs = [b.replace(b"\x00", b"") for b in blobs]
    frames = [t.encode() for t in texts] + blobs
    want = [yajl_spelling(t) for t in texts] + [yajl_spelling(per_byte_replaced(b)) for b in blobs]
    assert run(fast, "escape", frames) == ["OK " + w for w in want]


VALUES = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
                      | st.floats(allow_nan=False, allow_infinity=False)
                      | STRINGS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(STRINGS, kids, max_size=3),
                      max_leaves=6)


def containers(v: Any, path: Tuple[Any, ...] = ()) -> List[Tuple[Tuple[Any, ...], Any]]:
    found = [(path, v)] if isinstance(v, (dict, list)) else []
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
    for k, x in items:
        found += containers(x, path + (k,))
    return found


def yajl_dumps(doc: Any) -> str:
    """Compact JSON as fj_write spells it."""
    return re.sub(r"\\u00([0-9a-f]{2})", lambda m: "\\u00" + m.group(1).upper(),
                  json.dumps(doc, separators=(",", ":"), ensure_ascii=False))


def edit_case(rng: random.Random, doc: Dict[str, Any], values: List[Any], strings: List[str]) -> Tuple[str, str, str]:
    """(*doc*, an edit script for it, the document after the edits in Python)."""
    text = json.dumps(doc, separators=(",", ":"))
    script: List[List[Any]] = []
    for _ in range(rng.randrange(1, 7)):
        path, at = rng.choice(containers(doc))
        value = copy.deepcopy(rng.choice(values))
        string = rng.choice(strings)
        if isinstance(at, dict):
            op = rng.choice(["set", "set_str", "set_int", "remove", "object_at", "array_at", "new"])
            key = rng.choice([*at, string]) if at else string
            if op == "set":
                script.append([op, list(path), key, json.dumps(value)])
                at[key] = value
            elif op == "set_str":
                script.append([op, list(path), key, string])
                at[key] = string
            elif op == "set_int":
                n = rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**63), 2**63)])
                script.append([op, list(path), key, n])
                at[key] = n
            elif op == "remove":
                i = rng.randrange(len(at) + 1)
                script.append([op, list(path), i])
                if i < len(at):
                    del at[list(at)[i]]
            elif op == "new":
                kind = rng.choice(["null", "false", "true", "array", "object"])
                script.append([op, list(path), key, kind])
                at[key] = {"null": None, "false": False, "true": True, "array": [], "object": {}}[kind]
            else:
                script.append([op, list(path), key])
                want = dict if op == "object_at" else list
                if not isinstance(at.get(key), want):
                    at[key] = want()
        else:
            op = rng.choice(["append", "append_str", "insert", "remove"])
            if op == "append":
                script.append([op, list(path), json.dumps(value)])
                at.append(value)
            elif op == "append_str":
                script.append([op, list(path), string])
                at.append(string)
            elif op == "insert":
                i = rng.randrange(len(at) + 3)
                script.append([op, list(path), i, json.dumps(value)])
                at.insert(i, value)
            else:
                i = rng.randrange(len(at) + 1)
                script.append([op, list(path), i])
                if i < len(at):
                    del at[i]
    return text, json.dumps(script), yajl_dumps(doc)


@SETTINGS
@given(st.lists(st.dictionaries(STRINGS, VALUES, max_size=4), min_size=10, max_size=10),
       st.lists(VALUES, min_size=10, max_size=10), st.lists(STRINGS, min_size=10, max_size=10),
       SEEDED)
def test_edits_as_python(fast: Path, docs: List[Dict[str, Any]], values: List[Any], strings: List[str],
                         rng: random.Random) -> None:
    """The editors against the same edits on Python dicts and lists: the
    output is byte for byte json.dumps(separators=(",", ":"), ensure_ascii=False)
    up to yajl's upper-case hex."""
    cases = [edit_case(rng, copy.deepcopy(doc), values, strings) for doc in docs for _ in range(10)]
    frames = [s.encode() for doc, script, _ in cases for s in (doc, script)]
    assert run(fast, "edit", frames) == ["OK " + after for _, _, after in cases]


def test_append_many(fast: Path) -> None:
    """Appending grows member arrays geometrically (100k appends stay quick)."""
    n = 100_000
    script = json.dumps([["append", [], "1"]] * n + [["set_int", [0], "k", 7]] + [["remove", [], 0]])
    lines = run(fast, "edit", [b"[{}]", script.encode()])
    assert lines == ["OK [" + ",".join(["1"] * n) + "]"]


def test_edit_nonexistent_and_wrong_types(fast: Path) -> None:
    """fj_object_at/fj_array_at replace a member of the wrong type, create a
    missing one; removing past the end changes nothing; insert clamps."""
    frames = [b'{"a":[1],"b":{"x":1},"c":3}',
              b'[["object_at",[],"a"],["array_at",[],"b"],["array_at",[],"c"],["object_at",[],"d"],'
              b'["remove",[],9],["insert",["c"],99,"2"],["insert",["c"],0,"0"]]']
    assert run(fast, "edit", frames) == ['OK {"a":{},"b":[],"c":[0,2],"d":{}}']
