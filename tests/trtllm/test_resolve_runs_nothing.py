"""Resolving a ``trtllm:`` policy executes nothing from the source (issue #14 item 6).

Each crafted source plants a payload that writes a sentinel file in one place where Python runs
code while a function or class is only being *defined*: a default (positional, keyword-only) on
the pad method, on a helper it reaches, on a module function it calls, on the scheduler's
delegated method; a decorator (a module function, a call expression); a module-level function
shadowing ``property`` / ``staticmethod``; an annotation; a class-level statement; a metaclass or
base-class expression; a module-level statement. Resolving must either refuse with a clear
PolicyError naming the construct, or succeed without running it; the sentinel never appears.

Every case also runs with the stand-in namespace widened to the real builtins (the namespace the
loader had before this fix), so the test shows the payload is never *executed*, not merely that
it would fail for lack of ``__import__``.
"""
from __future__ import annotations

import builtins

import pytest
from trtllm_checkouts import FIXTURES, place

from forensics.errors import PolicyError
from replay.config import RunConfig
from replay.policy import FrameView
from replay.resolve import resolve_policy
from replay.states import RequestState as S

DISAGG = RunConfig(tp_size=2, disaggregated=True)
BASE = (FIXTURES / "py_executor_2026.py").read_text()
SCHED = (FIXTURES / "py_executor_16921.py").read_text()
PAD = "    def _pad_attention_dp_dummy_request(self):\n"
COUNT = "    def _count_schedulable_active_requests(self):\n"
CLASS = "class PyExecutor:\n"


def payload(sentinel) -> str:
    return f"__import__('pathlib').Path({str(sentinel)!r}).write_text('ran')"


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _with_helper(text: str, helper: str, call: str) -> str:
    text = _sub(text, CLASS, helper + "\n\n" + CLASS)
    return _sub(text, "        num_schedulable = self._count_schedulable_active_requests()\n",
                f"        {call}\n        num_schedulable = self._count_schedulable_active_requests()\n")


#: name -> (build(text, payload) -> source text, executor fixture, error fragments or None).
CASES = {
    "pad default": (lambda t, p: _sub(t, PAD, f"    def _pad_attention_dp_dummy_request(self, _x={p}):\n"),
                    BASE, ("_pad_attention_dp_dummy_request", "argument '_x'", "py_executor.py, line 36")),
    "pad keyword-only default": (
        lambda t, p: _sub(t, PAD, f"    def _pad_attention_dp_dummy_request(self, *, _k={p}):\n"),
        BASE, ("_pad_attention_dp_dummy_request", "keyword-only argument '_k'")),
    "helper default": (lambda t, p: _sub(t, COUNT, f"    def _count_schedulable_active_requests(self, _y={p}):\n"),
                       BASE, ("_count_schedulable_active_requests", "argument '_y'")),
    "module function default": (
        lambda t, p: _with_helper(t, f"def _helper(v=[{p}]):\n    return v", "_helper()"),
        BASE, ("_helper", "argument 'v'")),
    "module function of a module function": (
        lambda t, p: _with_helper(t, f"def _inner(w={p}):\n    return w\n\n\ndef _outer():\n"
                                     "    return _inner()", "_outer()"),
        BASE, ("_inner", "argument 'w'")),
    "scheduler method default": (None, SCHED, ("is_request_in_schedulable_state", "argument '_z'")),
    "decorator from the module": (
        lambda t, p: _sub(_sub(t, CLASS, f"def traced(fn):\n    {p}\n    return fn\n\n\n" + CLASS),
                          PAD, "    @traced\n" + PAD), BASE, None),
    "decorator call expression": (lambda t, p: _sub(t, PAD, f"    @{p}.__class__\n" + PAD), BASE, None),
    "property shadowed by a module function": (
        lambda t, p: _sub(_sub(t, CLASS, f"def property(fn):\n    {p}\n    return fn\n\n\n" + CLASS),
                          PAD, "    @property\n    def idle_pad(self):\n        return False\n\n"
                          + PAD.replace("(self):\n", "(self):\n        if self.idle_pad:\n"
                                                     "            return\n")),
        BASE, None),
    "staticmethod shadowed by a module function": (
        lambda t, p: _sub(_sub(t, CLASS, f"def staticmethod(fn):\n    {p}\n    return fn\n\n\n" + CLASS),
                          PAD, "    @staticmethod\n    def _no_skip():\n        return False\n\n"
                          + PAD.replace("(self):\n", "(self):\n        if self._no_skip():\n"
                                                     "            return\n")),
        BASE, None),
    "return annotation": (lambda t, p: _sub(t, PAD, PAD.replace("(self):", f"(self) -> {p}:")),
                          BASE, None),
    "argument annotation": (lambda t, p: _sub(t, PAD, PAD.replace("(self):", f"(self: {p}):")),
                            BASE, None),
    "class-level statement": (lambda t, p: _sub(t, CLASS, CLASS + f"    _marker = {p}\n"), BASE, None),
    "metaclass expression": (lambda t, p: _sub(t, CLASS, f"class PyExecutor(metaclass=type({p!s} and 'M', (type,), {{}})):\n"),
                             BASE, None),
    "base-class expression": (lambda t, p: _sub(t, CLASS, f"class PyExecutor(({p}, object)[1]):\n"),
                              BASE, None),
    "module-level statement": (lambda t, p: _sub(t, "import math\n", f"import math\n{p}\n"), BASE, None),
}


def _source(case: str, sentinel) -> tuple[str, str]:
    build, text, _ = CASES[case]
    if case == "scheduler method default":
        sched = (FIXTURES / "scheduler_16921.py").read_text()
        sched = _sub(sched, "    def is_request_in_schedulable_state(self, request):\n",
                     f"    def is_request_in_schedulable_state(self, request, _z={payload(sentinel)}):\n")
        return text, sched
    return build(text, payload(sentinel)), ""


@pytest.fixture(params=["stand-in namespace", "real builtins in the namespace"])
def namespace(request, monkeypatch):
    if request.param != "stand-in namespace":
        import replay.standin_namespace as standin
        real = standin.base_namespace

        def widened(logger):
            ns = real(logger)
            ns["__builtins__"] = builtins.__dict__
            return ns
        monkeypatch.setattr(standin, "base_namespace", widened)
        monkeypatch.setattr("replay.trtllm_source.base_namespace", widened)
    return request.param


@pytest.mark.parametrize("case", list(CASES))
def test_resolving_a_crafted_source_runs_none_of_it(tmp_path, case, namespace):
    sentinel = tmp_path / "SENTINEL"
    executor, scheduler = _source(case, sentinel)
    root = place(tmp_path / "checkout", "2026", executor_text=executor)
    if scheduler:
        (root / "tensorrt_llm/_torch/pyexecutor/scheduler/scheduler.py").write_text(scheduler)
    fragments = CASES[case][2]
    if fragments is not None:
        with pytest.raises(PolicyError) as err:
            resolve_policy(f"trtllm:{root}")
        text = str(err.value)
        assert "is not a literal" in text and "while the definition is only being loaded" in text
        for fragment in fragments:
            assert fragment in text
        assert "py_executor.py" in text or "scheduler" in text
    else:
        policy = resolve_policy(f"trtllm:{root}")
        frame = FrameView(iter=0, rank=0, requests=((1, int(S.DISAGG_GENERATION_INIT), False),),
                          expected=1, config=DISAGG)
        # The pad body runs (replay does execute bodies); the planted construct still does not.
        assert policy.pad_hook(frame).padded
    assert not sentinel.exists()


def test_dropped_decorators_are_listed_in_the_notes(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    executor, _ = _source("decorator from the module", sentinel)
    policy = resolve_policy(f"trtllm:{place(tmp_path / 'c', '2026', executor_text=executor)}")
    assert "decorators dropped unevaluated: _pad_attention_dp_dummy_request: @traced" in policy.notes


def test_literal_defaults_are_kept(tmp_path):
    text = _sub(BASE, PAD, "    def _pad_attention_dp_dummy_request(self, floor=0, tag=None, "
                           "ids=(-1, 'x'), *, opts={'a': [1.5]}):\n        assert floor == 0 and "
                           "ids == (-1, 'x') and opts == {'a': [1.5]}\n")
    policy = resolve_policy(f"trtllm:{place(tmp_path, '2026', executor_text=text)}")
    frame = FrameView(iter=0, rank=0, requests=((1, int(S.DISAGG_GENERATION_INIT), False),),
                      expected=1, config=DISAGG)
    assert policy.pad_hook(frame).padded


def test_bodies_see_no_real_os_and_no_open(tmp_path):
    """At replay time the body runs, in the stand-in's namespace: ``os.environ`` is empty and
    ``open`` is not a builtin there (reaching it is a PolicyError naming it, not a crash)."""
    text = _sub(BASE, "        num_schedulable = self._count_schedulable_active_requests()\n",
                "        assert not os.environ and os.getenv('HOME') is None\n"
                "        if self.iter_counter == 5:\n            open('/dev/null')\n"
                "        num_schedulable = self._count_schedulable_active_requests()\n")
    policy = resolve_policy(f"trtllm:{place(tmp_path, '2026', executor_text=text)}")
    reqs = ((1, int(S.DISAGG_GENERATION_INIT), False),)
    ok = policy.pad_hook(FrameView(iter=0, rank=0, requests=reqs, expected=1, config=DISAGG))
    assert ok.padded and ok.crash is None
    with pytest.raises(PolicyError, match="'open'"):
        policy.pad_hook(FrameView(iter=5, rank=0, requests=reqs, expected=1, config=DISAGG))
