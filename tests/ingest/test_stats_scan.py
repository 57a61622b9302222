"""The compiled path of the stats reader (``json_scan.stats``) gives exactly the per-object
reader's rows, on files that mix taken blocks, declined blocks, bad lines and cut tails.

The reference is the per-object parser (``stats_json._parse``) run on the same text: the
compiled scanner's specification, and what the reader uses for small inputs and for any block
the scanner declines.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from forensics.errors import StatsFormatError
from forensics.readers import json_scan, stats_json
from forensics.readers.stats_json import read_stats


pytestmark = pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    """The scanner forced on whatever the input's size, its learnt shape forgotten."""
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)


def _line(i: int, rank: int) -> dict:
    return {"iter": i, "timestamp": f"11/30/2026-10:00:{i % 60:02d}", "iterLatencyMS": 12.5 + i,
            "numActiveRequests": 3, "cpuMemUsage": 100, "schedulerMode": "guaranteed",
            "kvCacheStats": {"usedNumBlocks": 7 + i, "freeNumBlocks": 100},
            "inflightBatchingStats": {"numContextRequests": 1, "numScheduledRequests": 3,
                                      "microBatchId": 0, "avgNumDecodedTokensPerIter": 1.5},
            "attentionDpRank": rank}


def _reference(data: bytes) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Every table as the per-object parser makes it, over the whole text."""
    text = stats_json._Text(iter([(data, len(data), None)]), None)
    batches = list(stats_json._parse(text, stats_json._Rows("s.jsonl"), "s.jsonl"))
    return tuple(pa.concat_tables([getattr(b, n) for b in batches])
                 for n in ("stats", "events", "unparsed"))


def _read(path) -> tuple[pa.Table, pa.Table, pa.Table]:
    batches = list(read_stats(path, "s.jsonl"))
    return tuple(pa.concat_tables([getattr(b, n) for b in batches])
                 for n in ("stats", "events", "unparsed"))


def test_block_rows_typed_and_fields_in_key_order():
    """Line numbers count from the block's first line; typed keys leave ``fields``; a float in an
    int column (2.5) stays in ``fields``, 2.0 is typed 2; bools are 1.0/0.0 fields."""
    block = (b'{"iter":1,"timestamp":"t1","kv":{"a":1,"b":2.5},"numActiveRequests":2.5,"f":true}\n'
             b'{"iter":2.0,"timestamp":"t2","kv":{"a":3,"b":null},"numActiveRequests":4,"f":false}\n')
    got = json_scan.stats(block, 41, "s.jsonl")
    assert got is not None
    rows = got.stats.to_pylist()
    assert [(r["line"], r["line_end"], r["iter"], r["timestamp"]) for r in rows] == \
        [(41, 41, 1, "t1"), (42, 42, 2, "t2")]
    assert [r["num_active_requests"] for r in rows] == [None, 4]
    assert rows[0]["fields"] == [("kv.a", 1.0), ("kv.b", 2.5), ("numActiveRequests", 2.5),
                                 ("f", 1.0)]
    assert rows[1]["fields"] == [("kv.a", 3.0), ("f", 0.0)]


@pytest.mark.parametrize("block", [
    b'{"iter":1,"kv":{"b":1,"a":2}}\n{"iter":1,"kv":{"a":1,"b":2}}\n',   # key order differs
    b'{"iter":9007199254740993.0}\n',          # a typed int read as a float beyond 2**53
    b'{"iter":1}\n\n{"iter":2}\n',             # blank line
    b'{"iter":1} junk\n',                      # text after the object
    b'{"iter":1}{"iter":2}\n',                 # two objects on a line
    b'{"iter":1,"xs":[1,2]}\n',                # lists
    b'{"iter":1,"s":"a\\"b"}\n',               # escapes
    b'{"iter":1,"iter":2}\n',                  # a key twice
    b'{"iter":1,"a":{"n":1},"b":{"n":2}}\n',   # one name at two places
])
def test_odd_blocks_same_rows(block, tmp_path):
    """Blocks the scanner may decline (the reference reader then reads them): the same rows."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(block)
    assert _outcome(_read, path) == _outcome(_reference, block)


def _outcome(read, arg):
    """Rows of every table, or the error (a file starting with '[' is read as a JSON array)."""
    try:
        return [t.to_pylist() for t in read(arg)]
    except StatsFormatError as e:
        return str(e)


_MUTATIONS = [
    lambda s: "", lambda s: "   ", lambda s: s[: len(s) // 2], lambda s: s + " junk",
    lambda s: s.replace('"iter"', '"iter" '), lambda s: "[1, 2]", lambda s: s + s,
    lambda s: json.dumps(json.loads(s), indent=2), lambda s: s.replace("{", '{"zz": 1.5, ', 1),
    lambda s: s.replace('"iter":', '"iter":"x", "q":', 1), lambda s: s + "\r",
    lambda s: json.dumps(dict(reversed(list(json.loads(s).items())))), lambda s: "é" + s,
    lambda s: s.replace('"microBatchId": 0', '"microBatchId": true'),
]


@pytest.mark.parametrize("seed", range(40))
def test_mixed_files_match_the_per_object_reader(seed, tmp_path, monkeypatch):
    """Small blocks so that one file mixes vectorised blocks, declined blocks (bad lines kept
    in unparsed with their numbers), objects running past a block, and truncated tails."""
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 600)
    rnd = random.Random(seed)
    lines = [json.dumps(_line(i // 4, i % 4)) for i in range(rnd.randint(1, 60))]
    for _ in range(rnd.randint(0, 4)):
        i = rnd.randrange(len(lines))
        lines[i] = rnd.choice(_MUTATIONS)(lines[i])
    text = "\n".join(lines) + rnd.choice(["\n", "", "\n\n", '\n{"iter": 3'])
    data = text.encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    got, want = _outcome(_read, path), _outcome(_reference, data)
    assert got == want


def test_truncated_gzip_matches_the_per_object_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 2000)
    data = "".join(json.dumps(_line(i, 0)) + "\n" for i in range(300)).encode()
    gz = gzip.compress(data)
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(gz[: len(gz) * 2 // 3])
    stats, events, unparsed = _read(path)
    assert 0 < stats.num_rows < 300
    assert stats.column("line").to_pylist() == list(range(1, stats.num_rows + 1))
    assert events.column("kind").to_pylist() == [stats_json.TRUNCATED_KIND]
    # the event names the line after the last one read, as the per-object reader does
    last_line = stats.num_rows + unparsed.num_rows
    assert events.column("line").to_pylist() == [last_line + 1]


def test_compiled_path_is_taken_for_json_lines(tmp_path, monkeypatch):
    calls = []
    real = json_scan.stats
    monkeypatch.setattr(json_scan, "stats", lambda *a: calls.append(r := real(*a)) or r)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(_line(i, 0)) + "\n" for i in range(50)))
    assert _read(path)[0].num_rows == 50
    assert calls and all(c is not None for c in calls)


# --- the compiled path against the per-object reader: samples, simulated runs, random shapes -------

REPO = Path(__file__).resolve().parents[2]
SAMPLE_STATS = sorted((REPO / "traces" / "samples").glob("*/stats.jsonl"))


def _taken(monkeypatch) -> list[bool]:
    taken: list[bool] = []
    real = json_scan.stats
    monkeypatch.setattr(json_scan, "stats",
                        lambda *a: taken.append((r := real(*a)) is not None) or r)
    return taken


@pytest.mark.parametrize("path", SAMPLE_STATS, ids=lambda p: p.parent.name)
def test_samples_match_the_per_object_reader(path, monkeypatch):
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 4096)
    taken = _taken(monkeypatch)
    got = _outcome(_read, path)
    assert taken and all(taken)
    assert got == _outcome(_reference, path.read_bytes())


@pytest.fixture(scope="module")
def simulated_stats(tmp_path_factory) -> list[Path]:
    from forensics.simulate import SCENARIOS, simulate
    out = []
    for name in sorted(SCENARIOS):
        d = tmp_path_factory.mktemp(name)
        simulate(name, out_dir=d, iters=120, ranks=4 if name == "fleet-1h" else None,
                 write=("stats",), compression="gz" if len(out) % 2 else None)
        out.extend(sorted(d.glob("stats.jsonl*")))
    return out


def test_simulated_scenarios_match_the_per_object_reader(simulated_stats, monkeypatch):
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 8192)
    for path in simulated_stats:
        taken = _taken(monkeypatch)
        got = _outcome(_read, path)
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert got == _outcome(_reference, data), path
        assert taken and all(taken), path
        assert len(got[0]) == data.count(b"\n")


_KEYS = ["iter", "attentionDpRank", "numActiveRequests", "iterLatencyMS", "gpuMemUsage",
         "timestamp", "numNewActiveRequests"]
_NESTED = {"kvCacheStats": ["maxNumBlocks", "usedNumBlocks", "cacheHitRate"],
           "inflightBatchingStats": ["numContextRequests", "numCtxTokens", "microBatchId"]}


_FAMILIES = ("int", "float", "bool", "str")


def _value(rnd: random.Random, family: str):
    """A value of ``family``; now and then null, or (rarely) of another family."""
    r = rnd.random()
    if r < 0.05:
        return None
    if r < 0.07:
        family = rnd.choice(_FAMILIES)
    if family == "int":
        return rnd.randint(-5, 10 ** rnd.randint(1, 18 if rnd.random() < 0.99 else 20))
    if family == "float":
        return rnd.choice([rnd.uniform(-1e6, 1e6), rnd.random() * 10 ** rnd.randint(-300, 300),
                           float(rnd.randint(0, 99)), 2.0 ** 53 + 2 * rnd.randint(0, 9), -0.0])
    if family == "bool":
        return rnd.choice([True, False])
    return rnd.choice(["t", "2026-11-30 12:00:01", "é"])


def _random_object(rnd: random.Random, shape_rnd: random.Random, families: dict) -> dict:
    """An object over a fixed key pool: keys dropped, reordered (rarely), values of the key's
    family (``families``), nulls, now and then a value of another family."""
    keys = [*_KEYS, *_NESTED]
    if shape_rnd.random() < 0.02:
        shape_rnd.shuffle(keys)
    obj: dict = {}
    for k in keys:
        if rnd.random() < 0.05:
            continue
        if k in _NESTED:
            obj[k] = None if rnd.random() < 0.02 else \
                {s: _value(rnd, families[s]) for s in _NESTED[k] if rnd.random() < 0.95}
        else:
            obj[k] = _value(rnd, families[k])
    return obj


@pytest.mark.parametrize("seed", range(30))
def test_random_shapes_match_the_per_object_reader(seed, tmp_path, monkeypatch):
    """Values of every JSON type, absent and null keys, keys a first line lacks, a reordered
    line now and then, floats of every magnitude, ints past int64, a key given twice."""
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 1 << random.Random(seed).randint(9, 14))
    rnd, shape_rnd = random.Random(seed), random.Random(seed + 1000)
    typed = rnd.random() < 0.5         # half the files: typed values only, all taken fast
    families = {k: rnd.choice(_FAMILIES) if k != "timestamp" else "str"
                for k in (*_KEYS, *(s for sub in _NESTED.values() for s in sub))}
    lines = []
    for i in range(rnd.randint(20, 300)):
        obj = _random_object(rnd, shape_rnd, families) if not typed else \
            {"iter": i, "attentionDpRank": i % 4, "iterLatencyMS": rnd.random() * 100,
             "kvCacheStats": {"usedNumBlocks": rnd.randint(0, 999), "x": rnd.random()},
             **({"late": 1.5} if i > 10 and rnd.random() < 0.5 else {})}
        text = json.dumps(obj, separators=(",", ":") if rnd.random() < 0.5 else None,
                          ensure_ascii=rnd.random() < 0.01)       # rarely "\u00e9"
        if not typed and rnd.random() < 0.02:
            text = text.replace("{", '{"iter":-1,', 1)  # a key given twice, first value lost
        lines.append(text)
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    taken = _taken(monkeypatch)
    assert _outcome(_read, path) == _outcome(_reference, data)
    if typed:
        assert all(taken)
