"""Suite-wide settings: the hypothesis profiles.

Every property test takes its number of examples from the loaded profile (none sets its own):

- ``default``: a short run per property, what the README's ``python -m pytest -q`` uses;
- ``long``: the depth of a fuzz campaign, what ``benchmarks/fuzz.py`` runs the properties with.

Choose one with ``--hypothesis-profile long`` or ``HYPOTHESIS_PROFILE=long`` (the option wins).
"""
from __future__ import annotations

import os

from hypothesis import settings

#: Examples per property in a default run, and in a ``long`` one.
DEFAULT_EXAMPLES = 15
LONG_EXAMPLES = 1000

settings.register_profile("default", max_examples=DEFAULT_EXAMPLES, deadline=None)
settings.register_profile("long", max_examples=LONG_EXAMPLES, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
