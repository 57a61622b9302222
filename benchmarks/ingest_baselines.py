"""The baselines of the ingest benchmark (``benchmarks/ingest.py``): the scripts a user would
write to read an executor log's iteration lines (a one-regex loop with pandas, a lazy polars
pipeline, duckdb), as source templates this module fills in and writes into the benchmark's
work directory, where they can be read and rerun.
"""
from __future__ import annotations

from pathlib import Path

from log_generators import FLOATS, STRINGS, group_names, iteration_regex

# --------------------------------------------------------------------------- baselines

NAIVE = '''"""The loop a user would write: one regex per line, dict rows, pandas, Parquet."""
import re, sys
import pandas as pd

RX = re.compile({regex!r})
FLOATS, STRINGS = {floats!r}, {strings!r}
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = RX.match(line.rstrip("\\n"))
        if m:
            d = m.groupdict()
            d["line"] = n
            rows.append(d)
df = pd.DataFrame(rows)
for c in df.columns:
    if c not in STRINGS and c != "line":
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if c not in FLOATS:
            df[c] = df[c].astype("Int64")
df.to_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(len(df))
'''

POLARS = '''"""polars, lazy: whole lines, filter, one extract_groups, casts, sink_parquet."""
import sys
import polars as pl

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
lf = pl.scan_csv(sys.argv[1], has_header=False, separator="\\x1f", quote_char=None,
                 new_columns=["text"], schema_overrides={{"text": pl.String}}, infer_schema=False,
                 truncate_ragged_lines=True)
lf = lf.with_row_index("line", offset=1).filter(pl.col("text").str.contains("] iter = ", literal=True))
lf = lf.select("line", pl.col("text").str.extract_groups(RX).alias("g")).unnest("g")
lf = lf.filter(pl.col("iter").is_not_null()).with_columns(
    *(pl.col(c).cast(pl.Float64, strict=False) for c in NAMES if c in FLOATS),
    *(pl.col(c).cast(pl.Int64, strict=False) for c in NAMES if c not in FLOATS and c not in STRINGS))
lf.sink_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(pl.scan_parquet(sys.argv[2] + "/iterations.parquet").select(pl.len()).collect().item())
'''

DUCKDB = '''"""duckdb: one VARCHAR column, regexp_extract into named groups, TRY_CAST, COPY TO parquet."""
import sys
import duckdb

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
con = duckdb.connect()
con.execute("SET threads = 2")
casts = ", ".join(f"g.{{c}}" if c in STRINGS else
                  f"TRY_CAST(g.{{c}} AS {{'DOUBLE' if c in FLOATS else 'BIGINT'}}) AS {{c}}" for c in NAMES)
names = ", ".join("'" + c + "'" for c in NAMES)
src = (f"read_csv('{{sys.argv[1]}}', columns = {{{{'text': 'VARCHAR'}}}}, delim = '\\x1f', quote = '', "
       "escape = '', header = false, auto_detect = false, strict_mode = false, null_padding = true)")
rx = RX.replace("'", "''")
con.execute(f"""COPY (SELECT {{casts}} FROM (
    SELECT regexp_extract(text, '{{rx}}', [{{names}}]) AS g FROM {{src}} WHERE text LIKE '%] iter = %')
    WHERE g.iter <> '') TO '{{sys.argv[2]}}/iterations.parquet' (FORMAT parquet, COMPRESSION zstd)""")
print(con.execute(f"SELECT count(*) FROM '{{sys.argv[2]}}/iterations.parquet'").fetchone()[0])
'''


# The same three baselines for the varied log: its fields come in any order, so one regex of
# the whole line cannot read it; what a user writes instead is a head regex (the logger prefix
# and ``iter``) and one regex of the ``name = value`` / ``name: value`` pairs (the loop), or one
# extract per field (polars, duckdb).

#: Per column of the varied log: its value's regex (one group, the unit outside it) and its
#: kind (``f`` float, ``i`` integer, ``s`` string).
VARIED_VALUES = {
    "global_rank": (r"(\d+)", "i"), "rank": (r"(\d+)", "i"),
    "num_scheduled_requests": (r"(\d+)", "i"), "kv_cache_util": (r"([0-9.]+)", "f"),
    "currank_requests": (r"(\d+)/\d+", "i"), "total_requests": (r"\d+/(\d+)", "i"),
    "host_step_time": (r"([0-9.]+)ms", "f"), "prev_device_step_time": (r"([0-9.]+)ms", "f"),
    "timestamp": (r"([0-9: -]+)", "s"), "num_ctx_requests": (r"(\d+)", "i"),
    "num_ctx_tokens": (r"(\d+)", "i"), "num_generation_tokens": (r"(\d+)", "i"),
}
_VARIED_HEAD = (r"^\[(?P<log_time>[^\]]+)\] \[TRT-LLM\] \[RANK (?P<prefix_rank>\d+)\] "
                r"\[(?P<severity>[A-Z])\] iter = (?P<iter>\d+)")


def field_regex(column: str) -> str:
    """The regex of one column's value wherever its field is in the line (``name = v`` or
    ``name: v``, ``'name': v`` in the states dict); group 1 is the value."""
    name = {"currank_requests": "currank_total_requests",
            "total_requests": "currank_total_requests"}.get(column, column)
    return rf"\b{name}'?(?: =|:) {VARIED_VALUES[column][0]}"


NAIVE_VARIED = """\"\"\"The loop a user would write for fields in any order: a head regex, then one regex of
the name/value pairs (findall), dict rows, pandas, Parquet.\"\"\"
import re, sys
import pandas as pd

HEAD = re.compile({head!r})
PAIR = re.compile(r"'?(\\w+)'?(?: =|:) ([^,{{}}]+)")
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = HEAD.match(line)
        if m:
            d = m.groupdict()
            d.update(PAIR.findall(line, m.end()))
            d["line"] = n
            rows.append(d)
df = pd.DataFrame(rows)
df[["currank_requests", "total_requests"]] = df.pop("currank_total_requests").str.split("/", expand=True)
for c in ("host_step_time", "prev_device_step_time"):
    df[c] = df[c].str.removesuffix("ms")
for c in df.columns:
    if c not in ("log_time", "severity", "timestamp", "line"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if c not in {floats!r}:
            df[c] = df[c].astype("Int64")
df.to_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(len(df))
"""

POLARS_VARIED = """\"\"\"polars, lazy, fields in any order: whole lines, filter, the head's groups, one
extract per field, casts, sink_parquet.\"\"\"
import sys
import polars as pl

HEAD, FIELDS, KINDS = {head!r}, {fields!r}, {kinds!r}
lf = pl.scan_csv(sys.argv[1], has_header=False, separator="\\x1f", quote_char=None,
                 new_columns=["text"], schema_overrides={{"text": pl.String}}, infer_schema=False,
                 truncate_ragged_lines=True)
lf = lf.with_row_index("line", offset=1).filter(pl.col("text").str.contains("] iter = ", literal=True))
t = pl.col("text")
lf = lf.select("line", t.str.extract_groups(HEAD).alias("h"),
               *(t.str.extract(rx, 1).alias(c) for c, rx in FIELDS.items())).unnest("h")
typ = {{"f": pl.Float64, "i": pl.Int64}}
lf = lf.filter(pl.col("iter").is_not_null()).with_columns(
    pl.col("iter").cast(pl.Int64), pl.col("prefix_rank").cast(pl.Int64),
    *(pl.col(c).cast(typ[k], strict=False) for c, k in KINDS.items() if k in typ))
lf.sink_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(pl.scan_parquet(sys.argv[2] + "/iterations.parquet").select(pl.len()).collect().item())
"""

DUCKDB_VARIED = """\"\"\"duckdb, fields in any order: one VARCHAR column, the head's groups and one
regexp_extract per field, TRY_CAST, COPY TO parquet.\"\"\"
import sys
import duckdb

HEAD, FIELDS, KINDS = {head!r}, {fields!r}, {kinds!r}
con = duckdb.connect()
con.execute("SET threads = 2")
q = lambda s: s.replace("'", "''")
typ = {{"f": "DOUBLE", "i": "BIGINT"}}
head = ("h.log_time, TRY_CAST(h.prefix_rank AS BIGINT) AS prefix_rank, h.severity, "
        "TRY_CAST(NULLIF(h.iter, '') AS BIGINT) AS iter")
cols = ", ".join(f"TRY_CAST(NULLIF(regexp_extract(text, '{{q(rx)}}', 1), '') AS "
                 f"{{typ.get(KINDS[c], 'VARCHAR')}}) AS {{c}}" for c, rx in FIELDS.items())
src = (f"read_csv('{{sys.argv[1]}}', columns = {{{{'text': 'VARCHAR'}}}}, delim = '\\x1f', quote = '', "
       "escape = '', header = false, auto_detect = false, strict_mode = false, null_padding = true)")
con.execute(f\"\"\"COPY (SELECT * FROM (SELECT {{head}}, {{cols}} FROM (SELECT text, regexp_extract(text,
    '{{q(HEAD)}}', ['log_time', 'prefix_rank', 'severity', 'iter']) AS h FROM {{src}}
    WHERE text LIKE '%] iter = %')) WHERE iter IS NOT NULL) TO '{{sys.argv[2]}}/iterations.parquet' (FORMAT parquet, COMPRESSION zstd)\"\"\")
print(con.execute(f"SELECT count(*) FROM '{{sys.argv[2]}}/iterations.parquet'").fetchone()[0])
"""


def write_varied_baselines(work: Path) -> dict[str, Path]:
    """The baseline scripts for the varied log (fields in any order), in ``work``."""
    fill = dict(head=_VARIED_HEAD, floats=FLOATS,
                fields={c: field_regex(c) for c in VARIED_VALUES},
                kinds={c: k for c, (_, k) in VARIED_VALUES.items()})
    out = {}
    for name, src in (("naive", NAIVE_VARIED), ("polars", POLARS_VARIED),
                      ("duckdb", DUCKDB_VARIED)):
        p = work / f"baseline_{name}_varied.py"
        p.write_text(src.format(**fill))
        out[name] = p
    return out


def write_baselines(work: Path, variant: str) -> dict[str, Path]:
    regex = iteration_regex(variant)
    names = [n for n in group_names(variant)]
    fill = dict(regex=regex, floats=FLOATS, strings=STRINGS, names=names)
    out = {}
    for name, src in (("naive", NAIVE), ("polars", POLARS), ("duckdb", DUCKDB)):
        p = work / f"baseline_{name}_{variant}.py"
        p.write_text(src.format(**fill))
        out[name] = p
    return out
