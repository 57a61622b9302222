"""The version of adp-forensics (also in pyproject.toml), in a module of its own so any module
may import it without importing the package's entry points."""

__version__ = "0.1.0"
