"""The per-user cache: entries read back as written, damaged or unwritable ones are misses (never
errors), and a post-mortem path's exploration read back from it equals the one computed."""
from __future__ import annotations

from forensics import open_paths as paths
from forensics.user_cache import entry_key, read_entry, user_cache_dir, write_entry
from replay.catalogue import get_policy
from replay.config import RunConfig


def test_entries_round_trip_under_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("FORENSICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "adp-forensics"
    key = entry_key("a", 1, (2, 3))
    assert key == entry_key("a", 1, (2, 3)) and key != entry_key("a", 1, (3, 2))
    assert read_entry("area", key) is None
    write_entry("area", key, {"n": 3, "xs": [1, 2]})
    assert read_entry("area", key) == {"n": 3, "xs": [1, 2]}
    assert [p.name for p in (tmp_path / "adp-forensics" / "area").iterdir()] == [f"{key}.json"]


def test_damaged_and_unwritable_entries_are_misses(tmp_path, monkeypatch):
    monkeypatch.delenv("FORENSICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "adp-forensics" / "area").mkdir(parents=True)
    (tmp_path / "adp-forensics" / "area" / "k.json").write_text('{"n": ')
    assert read_entry("area", "k") is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.delenv("FORENSICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file: no directory can be made under it
    write_entry("area", "k", {"n": 1})
    assert read_entry("area", "k") is None


def test_a_path_read_back_from_the_cache_equals_the_one_explored(tmp_path, monkeypatch):
    """newest on the aggregated non-overlap path at pp_size 1 leaks in 2 ranks, 2 iterations
    (GENERATION_TO_COMPLETE needs a forward first); the second call, in a fresh in-process
    memo, reads the entry back."""
    monkeypatch.delenv("FORENSICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = RunConfig(tp_size=4, disaggregated=False, overlap_scheduler=False, max_batch_size=2)
    policy = get_policy("newest")
    paths.explore_path.cache_clear()
    first = paths.explore_path(policy, config, "leaks are warned about and waste capacity")
    assert len(list((tmp_path / "adp-forensics" / "explore-paths").iterdir())) == 1
    paths.explore_path.cache_clear()
    monkeypatch.setattr(paths, "_explore_path", None)  # exploring again would fail
    second = paths.explore_path(policy, config, "leaks are warned about and waste capacity")
    assert second == first
    witness, schedules = first
    assert witness is not None and (witness.kind, witness.ranks, witness.iterations) == ("leak", 2, 2)
    assert schedules > 0
    paths.explore_path.cache_clear()
