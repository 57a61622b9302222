"""replay.stage_clock: phases and stages add up what they time, and nothing else."""
from __future__ import annotations

import threading
import time

from replay.stage_clock import StageClock


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_sleeping_stage_is_busy_but_not_on_the_cpu():
    clock = StageClock()
    with clock.stage("wait"):
        time.sleep(0.2)
    rec = clock.report()["stages"]["wait"]
    assert rec["blocks"] == 1
    assert rec["busy"] >= 0.2
    assert rec["cpu"] < 0.1


def test_a_spinning_stage_counts_its_cpu_and_adds_up_over_blocks():
    clock = StageClock()
    for _ in range(3):
        with clock.stage("spin"):
            _spin(0.05)
    rec = clock.report()["stages"]["spin"]
    assert rec["blocks"] == 3
    assert 0.15 <= rec["cpu"] < 0.5
    assert rec["busy"] >= rec["cpu"] - 0.01


def test_stages_on_two_threads_add_up_their_cpu():
    clock = StageClock()

    def work():
        with clock.stage("both"):
            _spin(0.1)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec = clock.report()["stages"]["both"]
    assert rec["blocks"] == 2
    assert rec["cpu"] >= 0.2          # each thread's own 0.1 s, summed


def test_timed_counts_producing_the_items_not_consuming_them():
    clock = StageClock()

    def produce():
        for k in range(2):
            time.sleep(0.1)           # producing: counted
            yield k

    got = []
    for item in clock.timed("read", produce()):
        time.sleep(0.2)               # consuming: not counted
        got.append(item)
    assert got == [0, 1]
    rec = clock.report()["stages"]["read"]
    assert rec["blocks"] == 3         # two items, and the call that found the end
    assert 0.2 <= rec["busy"] < 0.4


def test_phases_in_order_and_reset_forgets():
    clock = StageClock()
    with clock.phase("ingest"):
        time.sleep(0.05)
    with clock.phase("replay"):
        pass
    report = clock.report()
    assert list(report["phases"]) == ["ingest", "replay"]
    assert report["phases"]["ingest"]["wall"] >= 0.05
    assert report["stages"] == {}
    clock.reset()
    assert clock.report() == {"phases": {}, "stages": {}}
