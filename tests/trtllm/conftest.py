"""Fixtures of the issue #6 tests (helpers live in ``trtllm_checkouts``)."""
from trtllm_checkouts import git_repo  # noqa: F401  (pytest fixture)
