"""Bad input is never fatal: documented lines with their values, separators and prefixes
corrupted in ways real logs corrupt them (huge or negative numbers, units, cut lines, stray
braces) must parse without an exception, and every line must still be accounted for once."""
from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import log_lines
from .test_line_accounting import assert_accounted, write

NASTY_VALUES = ["99999999999", "99999999999999999999", "-1", "0x10", "nan", "inf", "1e400",
                "1.5.2", "", "N/A", "NaN", "12ms", "3/", "/4", "1/2/3", "{", "}", "'", "=", ":",
                "\u00e9", "\x00"]


def mutate(line: str, rng: random.Random) -> str:
    """One corruption of ``line``: a value replaced, a separator dropped or doubled, a cut."""
    choice = rng.randrange(5)
    if choice == 0 and " = " in line:                      # replace one value
        head, _, tail = line.partition(" = ")
        value_end = tail.find(",")
        rest = tail[value_end:] if value_end >= 0 else ""
        return f"{head} = {rng.choice(NASTY_VALUES)}{rest}"
    if choice == 1:                                        # cut anywhere
        return line[: rng.randrange(len(line) + 1)]
    if choice == 2:                                        # drop a separator
        return line.replace(", ", ",", 1) if rng.random() < 0.5 else line.replace(" = ", "=", 1)
    if choice == 3:                                        # duplicate a field
        parts = line.split(", ")
        i = rng.randrange(len(parts))
        return ", ".join(parts[: i + 1] + [parts[i]] + parts[i + 1:])
    return line.replace(str(rng.randrange(10)), rng.choice(NASTY_VALUES), 1)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40),
       block=st.sampled_from([97, 4096, 1 << 20]))
def test_mutated_lines_never_fail_the_parse_and_stay_accounted(seed, n, block):
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        body, _ = log_lines.iteration_body(rng.choice(log_lines.VERSIONS), it=i,
                                           global_rank=rng.randrange(4), rank=0)
        line = f"[{log_lines.LOG_TIME}] [TRT-LLM] [RANK {rng.randrange(4)}] [I] {body}"
        lines.append(mutate(line, rng) if rng.random() < 0.7 else line)
    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), text, None)
        it, ev, un = assert_accounted(path, text.count("\n"), block_bytes=block)
    assert it.num_rows + ev.num_rows + un.num_rows >= 1
