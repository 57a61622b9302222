"""A run whose model is unknown, replayed under a version whose gates read the model.

Such a run is replayed once per model inside the gates and once with a model outside every
gate (:func:`model_variants`); the result is the worst of them, carrying every variant
(:class:`GatedReplay`), so a report says how the verdict depends on the model.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from replay.config import RunConfig
from replay.policy import Policy, model_name

if TYPE_CHECKING:
    from replay.results import ReplayResult


#: Verdict words from best to worst (the primary result of a gated replay is the worst).
VERDICT_ORDER = ("clean", "leak", "crash")


@dataclasses.dataclass(frozen=True, eq=False)
class GatedReplay:
    """A run whose model is unknown, replayed under a version whose gates read the model: once
    per model inside a gate and once with a model outside every gate.

    Fields:
        policy: the version's name.
        models: the models inside its gates (``pretrained_config.model_type``), sorted.
        variants: ``((model, result), ...)``, one per model, then ``(None, result)`` outside.
        shown: the model whose replay is the primary result (None: outside): the worst verdict,
            outside on a tie, so a gated fix is never called clean unless it is clean either way.
    """

    policy: str
    models: tuple[str, ...]
    variants: tuple[tuple["str | None", "ReplayResult"], ...]
    shown: "str | None"

    def variant(self, model: "str | None") -> "ReplayResult":
        for m, r in self.variants:
            if m == model:
                return r
        raise KeyError(f"no replay under model {model!r}; replayed: "
                       + ", ".join(str(m) for m, _ in self.variants))

    def verdicts(self) -> dict["str | None", str]:
        return {m: r.verdict for m, r in self.variants}

    def summary(self) -> str:
        """``leak unless the model is DeepSeek-V4`` (the outside verdict, then the exceptions)."""
        v = self.verdicts()
        outside = v[None]
        inside = {m: w for m, w in v.items() if m is not None}
        if all(w == outside for w in inside.values()):
            return f"{outside} whatever the model"
        if len(set(inside.values())) == 1:
            w = next(iter(inside.values()))
            names = " or ".join(model_name(m) for m in inside)
            if w == "clean":
                return f"{outside} unless the model is {names}"
            return f"{outside}; {w} if the model is {names}"
        parts = ", ".join(f"{w} if the model is {model_name(m)}" for m, w in inside.items())
        return f"{outside} for other models; {parts}"

    def to_json(self) -> dict[str, Any]:
        return {"models": list(self.models), "shown": self.shown, "summary": self.summary(),
                "verdicts": {("other" if m is None else m): w for m, w in self.verdicts().items()}}


def replay_both_ways(policy: Policy, config: RunConfig, models: tuple[str, ...],
                     replay_one) -> "ReplayResult":
    """Replay under each model of ``models`` and under a model outside every gate, and return
    the worst replay carrying every variant (:class:`GatedReplay`); ``replay_one(config)``
    replays one configuration. The primary result keeps ``config`` (model unknown)."""
    return combine_model_variants(policy, config, models, [
        (m, replay_one(c)) for m, c in model_variants(config, models)])


def model_variants(config: RunConfig, models: tuple[str, ...]
                   ) -> list[tuple[str | None, RunConfig]]:
    """The configurations a run of unknown model is replayed under: each model of ``models``,
    then (``None``) a model outside every gate."""
    return ([(m, dataclasses.replace(config, model_arch=m)) for m in models]
            + [(None, dataclasses.replace(config, model_arch=OUTSIDE_MODEL))])


def combine_model_variants(policy: Policy, config: RunConfig, models: tuple[str, ...],
                           variants: list[tuple[str | None, "ReplayResult"]]) -> "ReplayResult":
    """The worst of the per-model replays (:func:`model_variants` order), carrying them all."""
    rank = {w: i for i, w in enumerate(VERDICT_ORDER)}
    shown, best = None, variants[-1][1]
    for m, r in variants[:-1]:
        if rank[r.verdict] > rank[best.verdict]:
            shown, best = m, r
    gated = GatedReplay(policy=policy.name, models=tuple(models), variants=tuple(variants),
                        shown=shown)
    label = "a model outside the gate" if shown is None else f"model {shown}"
    note = (f"the run does not name its model and {policy.name}'s gates read it: replayed per "
            f"model ({gated.summary()}); the decisions shown assume {label}")
    return best.with_changes(config=config, gated=gated, notes=best.notes + (note,))


#: The model_arch a replay "outside every gate" assumes (no gate names it).
OUTSIDE_MODEL = "(other model)"


__all__ = ["OUTSIDE_MODEL", "VERDICT_ORDER", "GatedReplay", "combine_model_variants", "model_variants",
           "replay_both_ways"]
