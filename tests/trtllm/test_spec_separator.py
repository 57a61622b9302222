"""``@`` in ``trtllm:PATH@REV`` read one way only (issue #25 item 6): an existing path wins,
``#`` always separates a revision, and the label says which reading was taken."""
from __future__ import annotations

from trtllm_checkouts import place

from replay.resolve import resolve_policy
from replay.trtllm_checkout import parse_spec, read_source


def test_an_existing_path_with_an_at_sign_is_the_path(tmp_path):
    at = place(tmp_path / "dir@HEAD", "2026")
    assert parse_spec(f"trtllm:{at}") == (str(at), None)
    label = read_source(at).label
    assert label == f"{at} (working tree; '@' is part of the path, which exists)"


def test_at_sign_separates_a_revision_when_the_whole_text_is_no_path(tmp_path):
    assert parse_spec(f"trtllm:{tmp_path}/dir@HEAD") == (f"{tmp_path}/dir", "HEAD")
    assert parse_spec("trtllm:/src/TensorRT-LLM@v1.2.0") == ("/src/TensorRT-LLM", "v1.2.0")


def test_hash_always_separates_a_revision(tmp_path):
    at = place(tmp_path / "dir@HEAD", "2026")
    assert parse_spec(f"trtllm:{at}#v1.2.0") == (str(at), "v1.2.0")
    assert parse_spec("trtllm:/src/TensorRT-LLM#main") == ("/src/TensorRT-LLM", "main")
    assert parse_spec("trtllm:installed#v1.2.0") == ("installed", "v1.2.0")
    assert parse_spec("trtllm:installed") == (None, None)


def test_a_revision_of_a_path_holding_at_is_labelled_with_hash(tmp_path, git_repo):
    sha = git_repo.commit_era("2026", "pre-fix executor")
    at = tmp_path / "clone@HEAD"
    git_repo.root.rename(at)
    policy = resolve_policy(f"trtllm:{at}#{sha}")
    assert policy.source.startswith(f"{at}#{sha[:12]}")
    # The same text without "#" is the working tree of the existing directory.
    tree = resolve_policy(f"trtllm:{at}")
    assert "(working tree; '@' is part of the path" in tree.source
