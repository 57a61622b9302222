"""Policies that run the real TensorRT-LLM pad code: ``trtllm:PATH[@REV]``, ``trtllm:PATH#REV``
and ``trtllm:installed``.

The source file is never imported. It is parsed with :mod:`ast`; only the function definitions
the pad step needs are compiled and executed (no module-level statement, class body, base-class
or metaclass expression of the file ever runs), in a namespace of stand-ins
(``replay.standin_namespace``, ``self`` a ``replay.standin_executor``), never the source's
globals. Resolving a policy runs nothing from the source (issue #14 item 6,
``replay.source_guard``): a non-literal default is refused with its name and line, decorators
are never evaluated (the known ones come from the stand-in) and annotations are removed. Replaying *does* run the extracted bodies, as the user, like ``git
bisect run`` runs the tree it checks out: the stand-in namespace is not a sandbox
(``().__class__.__base__.__subclasses__()`` reaches ``os.system``); ``replay.isolation``
(``--isolate``) runs them in a confined child process. The definitions taken:

* from class ``PyExecutor``: ``_pad_attention_dp_dummy_request`` and every method of the class it
  reaches through ``self.NAME`` (``_count_schedulable_active_requests`` since PR #12208, the
  benchmark-fill skip, the KV-capacity check, ...), unless the stand-in provides ``NAME`` itself;
* from the scheduler module, when the build delegates (PR #16921): the class method
  ``is_request_in_schedulable_state`` and what it reaches;
* module-level functions of either file that the extracted code calls by name.

A method or function the pad step reaches whose body the source elides (``...`` only, as in a
reduced copy) is refused with a :class:`~forensics.errors.PolicyError` naming it: its behaviour is
unknown, and replaying it as a no-op would invent one. (A method the stand-in answers itself, such
as ``_has_adp_dummy_kv_capacity``, is never taken from the source.)

Decorators other than ``property``/``staticmethod``/``classmethod`` (``nvtx_range``) are dropped
(listed in the notes) and annotations are removed. A global name the code uses and the namespace lacks is bound
to a sentinel that raises :class:`~forensics.errors.PolicyError` naming it and the revision when the
code reaches it; the static list of such names is stated in the policy's notes.

The era is read off what the source contains (``replay.era.detect_era``) and picks the catalogue
policy that supplies the rest of the loop (can_queue, removal, rollback, cap).
"""
from __future__ import annotations
import __future__

import ast
import dataclasses
import linecache
import logging
import symtable
from typing import Any, Callable, Optional

from replay.errors import PolicyError
from replay.catalogue import get_policy
from replay.era import (
    DELEGATE_METHOD,
    PAD_METHOD,
    ROLLBACK_METHODS,
    TASK_PAD_METHOD,
    attr_names,
    detect_era,
    find_cap,
    loaded_names,
    names_read,
)
from replay.policy import FrameView, PadOutcome, Policy
from replay.source_guard import (
    SAFE_BUILTINS,
    apply_decorators,
    definition_only,
    dropped_decorators,
    sanitize,
)
from replay.config import RunConfig
from replay.trtllm_checkout import (
    EXECUTOR_FILE,
    SCHEDULER_FILES,
    TASK_FILES,
    SourceText,
    load_source,
    parse_spec,
)
from replay.lockstep import call_pad, run_fleet
from replay.feature_flags import (
    DSV4_MODELS,
    FEATURE_FLAGS,
    MODEL_ASSUMPTIONS,
    SCHEDULER_AWARE_OVERLAP_MODELS,
    config_seen,
    model_assumptions,
)
from replay.standin_executor import STANDIN_EFFECT_METHODS, StandinExecutor, StandinScheduler
from replay.standin_namespace import RecordingLogger, base_namespace

log = logging.getLogger(__name__)

@dataclasses.dataclass
class Extracted:
    """The function definitions taken from one revision, still as AST.

    Fields:
        methods: ``PyExecutor`` methods by name (pad first).
        module_functions: module-level functions of the executor file they call.
        scheduler_methods: methods of the scheduler class (``is_request_in_schedulable_state``...).
        scheduler_functions: module-level functions of the scheduler file those call.
        class_methods: every method name ``PyExecutor`` defines (for era detection).
        label: as in :class:`SourceText`.
        executor_text, scheduler_text: the files' text (so tracebacks can quote the real lines).
        cap: where the cap on ``expected_num_active_requests`` was found (``file:function``),
            or None.
        pad_name: the pad method's name (``pad_attention_dp_dummy_request`` on a loop task).
        owner, owner_file: the class holding it and its file (``PyExecutor`` or a loop task).
        rollback_name: the method rolling a pending dummy back, when the class has one (its
            closure is extracted too, to probe the rollback's gate, see ``SourcePolicy``).
    """

    methods: dict[str, ast.FunctionDef]
    module_functions: dict[str, ast.FunctionDef]
    scheduler_methods: dict[str, ast.FunctionDef]
    scheduler_functions: dict[str, ast.FunctionDef]
    class_methods: frozenset[str]
    label: str
    executor_text: str = ""
    scheduler_text: str = ""
    cap: Optional[str] = None
    pad_name: str = PAD_METHOD
    owner: str = "PyExecutor"
    owner_file: str = EXECUTOR_FILE
    rollback_name: Optional[str] = None


# --------------------------------------------------------------------------- extraction

def _parse(text: str, label: str, what: str) -> ast.Module:
    try:
        return ast.parse(text, filename=f"{label}:{what}")
    except SyntaxError as e:
        raise PolicyError(f"{label}: {what} does not parse: {e.msg}", line=e.lineno) from None


def _is_accessor(fn: ast.FunctionDef) -> bool:
    """``@NAME.setter`` / ``@NAME.deleter``: the second half of a property, not a method."""
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
               for d in fn.decorator_list)


def _functions(body: list[ast.stmt]) -> dict[str, ast.FunctionDef]:
    """The functions defined in ``body`` by name; a property keeps its getter.

    Upstream declares some executor state as a property with a setter (``is_warmup``). Reading
    the name must run the getter, so the setter (dropped with its decorator it would bind as a
    plain, always-truthy method) never replaces it.
    """
    out: dict[str, ast.FunctionDef] = {}
    for n in body:
        if (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not (_is_accessor(n) and n.name in out)):
            out[n.name] = n
    return out


def _self_attrs(node: ast.AST) -> set[str]:
    """Attribute names read off ``self`` inside a function."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "self"}


def elided(fn: ast.FunctionDef) -> bool:
    """The body is ``...`` alone (after an optional docstring): a stub whose code the source
    leaves out (a reduced or ``.pyi``-style copy), not a method that does nothing."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return (len(body) == 1 and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and body[0].value.value is Ellipsis)


def _refuse_elided(fn: ast.FunctionDef, label: str, what: str) -> None:
    if elided(fn):
        raise PolicyError(f"{label}: {what}: {fn.name} has its body elided (`...` only): what it "
                          "does is unknown, and it is not replayed as a method that does nothing",
                          line=getattr(fn, "lineno", None),
                          hint="point at a source where the pad step's methods are complete")


def _closure(start: list[str], methods: dict[str, ast.FunctionDef], provided: set[str],
             label: str, what: str) -> dict[str, ast.FunctionDef]:
    """``start`` plus the methods they reach via ``self.NAME`` that the stand-in lacks.

    Each is sanitized (``replay.source_guard``) as it is taken: a non-literal default is refused
    here, before anything is compiled.
    """
    out: dict[str, ast.FunctionDef] = {}
    todo = list(start)
    while todo:
        name = todo.pop(0)
        if name in out or name not in methods:
            continue
        _refuse_elided(methods[name], label, what)
        out[name] = sanitize(methods[name], label, what)
        todo.extend(sorted(a for a in _self_attrs(out[name])
                           if a in methods and a not in provided and a not in out))
    return out


def _module_closure(nodes: list[ast.AST], functions: dict[str, ast.FunctionDef],
                    label: str, what: str) -> dict[str, ast.FunctionDef]:
    """Module-level functions called by name from the (sanitized) ``nodes``, transitively.

    A module function named like a known decorator (``def property(...)``) is never taken: the
    decorators are gone from the sanitized nodes, and the known ones come from the stand-in.
    """
    out: dict[str, ast.FunctionDef] = {}
    todo = sorted(set().union(*(loaded_names(n) for n in nodes)) if nodes else set())
    while todo:
        name = todo.pop(0)
        if name in out or name not in functions:
            continue
        _refuse_elided(functions[name], label, what)
        out[name] = sanitize(functions[name], label, what)
        todo.extend(sorted(loaded_names(out[name]) - set(out)))
    return out


def _provided(cls: type, sample_attrs: set[str]) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("__")} | sample_attrs


def _standin_executor_attrs() -> set[str]:
    sample = StandinExecutor(FrameView(iter=0, rank=0, requests=(), expected=0,
                                       config=RunConfig(tp_size=1)))
    return _provided(StandinExecutor, set(vars(sample))) | set(STANDIN_EFFECT_METHODS)


def extract(source: SourceText) -> Extracted:
    """Pick the pad step's functions out of the source, without running anything.

    The pad is looked for where it lives: ``PyExecutor._pad_attention_dp_dummy_request``
    (NVIDIA main), else a loop-task class of :data:`TASK_FILES` defining
    ``pad_attention_dp_dummy_request`` (the fork's ``IngestionTask``; it reads its state through
    ``self._ctx``, which the stand-in provides).
    """
    tree = _parse(source.executor, source.label, EXECUTOR_FILE)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PyExecutor"),
               None)
    owner_file, owner_tree, pad_name = EXECUTOR_FILE, tree, PAD_METHOD
    class_methods = _functions(cls.body) if cls is not None else {}
    if PAD_METHOD not in class_methods:
        task = _find_task(source)
        if task is None:
            if cls is None:
                raise PolicyError(f"{source.label}: {EXECUTOR_FILE} has no class PyExecutor")
            raise PolicyError(f"{source.label}: PyExecutor has no {PAD_METHOD} and no loop task "
                              f"({', '.join(TASK_FILES)}) defines {TASK_PAD_METHOD}",
                              hint="this revision predates attention-DP padding or moved it; try "
                                   "another revision")
        owner_file, owner_tree, cls, pad_name = task
        class_methods = _functions(cls.body)
    rollback = next((n for n in ROLLBACK_METHODS if n in class_methods), None)
    provided = _standin_executor_attrs() - {pad_name}
    starts = [pad_name] + ([rollback] if rollback else [])
    methods = _closure(starts, class_methods, provided, source.label, owner_file)
    module_fns = _module_closure(list(methods.values()), _functions(owner_tree.body), source.label,
                                 owner_file)

    sched_methods: dict[str, ast.FunctionDef] = {}
    sched_fns: dict[str, ast.FunctionDef] = {}
    delegates = any(DELEGATE_METHOD in attr_names(m) for m in methods.values())
    if delegates:
        if source.scheduler is None:
            raise PolicyError(f"{source.label}: the pad code calls scheduler.{DELEGATE_METHOD} "
                              f"but no scheduler module exists ({' or '.join(SCHEDULER_FILES)})")
        stree = _parse(source.scheduler, source.label, "scheduler")
        owners = [n for n in stree.body if isinstance(n, ast.ClassDef)
                  and DELEGATE_METHOD in _functions(n.body)]
        owners.sort(key=lambda c: c.name != "RequestScheduler")
        if not owners:
            raise PolicyError(f"{source.label}: the pad code needs scheduler.{DELEGATE_METHOD}, "
                              "which no class of the scheduler module defines")
        sched_provided = (_provided(StandinScheduler, {"scheduling_state_range",
                                                       "no_schedule_until_state",
                                                       "no_schedule_after_state"})
                          - {DELEGATE_METHOD})
        sched_methods = _closure([DELEGATE_METHOD], _functions(owners[0].body), sched_provided,
                                 source.label, "scheduler")
        sched_fns = _module_closure(list(sched_methods.values()), _functions(stree.body),
                                    source.label, "scheduler")
    # The router first: that is where the cap lives since 2026 (``hard_cap``, PR #13347).
    trees = {rel: _try_parse(text) for rel, text in source.routers.items()}
    trees.update({EXECUTOR_FILE: tree, owner_file: owner_tree})
    cap = find_cap(trees)
    owner_text = source.executor if owner_file == EXECUTOR_FILE else source.tasks[owner_file]
    return Extracted(methods=methods, module_functions=module_fns, scheduler_methods=sched_methods,
                     scheduler_functions=sched_fns, class_methods=frozenset(class_methods),
                     label=source.label, executor_text=owner_text,
                     scheduler_text=source.scheduler or "", cap=cap, pad_name=pad_name,
                     owner=cls.name, owner_file=owner_file, rollback_name=rollback)


def _find_task(source: SourceText) -> Optional[tuple[str, ast.Module, ast.ClassDef, str]]:
    """``(file, tree, class, pad name)`` of a loop task defining the pad, or None."""
    for rel, text in source.tasks.items():
        tree = _parse(text, source.label, rel)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                names = _functions(node.body)
                for pad in (TASK_PAD_METHOD, PAD_METHOD):
                    if pad in names:
                        return rel, tree, node, pad
    return None


def _try_parse(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


# --------------------------------------------------------------------------- compiling

class MissingName:
    """Bound to a global the extracted code uses but the namespace lacks; any use fails clearly."""

    def __init__(self, name: str, label: str):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_label", label)

    def _fail(self, *_: Any, **__: Any):
        raise PolicyError(f"{object.__getattribute__(self, '_label')}: the extracted code needs "
                          f"{object.__getattribute__(self, '_name')!r}, which the stand-in "
                          "executor does not provide",
                          hint="extend replay/standin_namespace.py or pick another revision")

    __call__ = __iter__ = __bool__ = __len__ = __int__ = __index__ = _fail
    __getitem__ = __contains__ = __eq__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __hash__ = None  # type: ignore[assignment]

    def __getattr__(self, _attr: str):
        self._fail()

    def __repr__(self) -> str:
        return f"<missing {object.__getattribute__(self, '_name')}>"


def _global_names(fns: list[ast.FunctionDef]) -> set[str]:
    """Globals the functions read (symtable: exact scoping, comprehensions and lambdas included)."""
    if not fns:
        return set()
    src = ast.unparse(ast.Module(body=list(fns), type_ignores=[]))
    found: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for sym in table.get_symbols():
            if sym.is_global() and sym.is_referenced():
                found.add(sym.get_name())
        for child in table.get_children():
            walk(child)

    for child in symtable.symtable(src, "<extracted>", "exec").get_children():
        walk(child)
    return found


def _compile_into(ns: dict[str, Any], fns: dict[str, ast.FunctionDef], label: str,
                  what: str, text: str = "") -> dict[str, Any]:
    """Execute each function definition (and only it) in ``ns``; return the objects by name.

    The nodes keep their line numbers, and the file's text is registered with ``linecache``
    under the same name, so a replayed crash can quote the real line.
    """
    out: dict[str, Any] = {}
    flags = __future__.annotations.compiler_flag
    filename = f"{label}:{what}"
    if text:
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    for name, fn in fns.items():
        if not definition_only(fn):  # sanitize() ran in extract(); never exec anything else
            raise PolicyError(f"{label}: {what}: {name} was not sanitized before compiling",
                              line=getattr(fn, "lineno", None))
        module = ast.Module(body=[fn], type_ignores=[])
        ast.fix_missing_locations(module)
        code = compile(module, filename, "exec", flags=flags, dont_inherit=True)
        # A bare def statement with literal defaults: binds the function, runs none of its body.
        exec(code, ns)
        out[name] = apply_decorators(ns[name], fn)
        ns[name] = out[name]
    return out


def _namespace(logger: RecordingLogger, fns: list[ast.FunctionDef], local: set[str],
               label: str) -> tuple[dict[str, Any], list[str]]:
    ns = base_namespace(logger)
    missing = sorted(n for n in _global_names(fns)
                     if n not in ns and n not in local and n not in SAFE_BUILTINS)
    for name in missing:
        ns[name] = MissingName(name, label)
    return ns, missing


@dataclasses.dataclass(frozen=True)
class CompiledSource:
    """Extracted code turned into stand-in classes.

    Fields:
        executor_class: a :class:`StandinExecutor` subclass carrying the extracted methods.
        logger: the recording logger every extracted function writes to.
        missing: global names the code uses that the stand-in lacks (fail only if reached).
        label: as in :class:`SourceText`.
        pad_name: the pad method to call.
        rollback_name: the source's rollback method, or None.
    """

    executor_class: type
    logger: RecordingLogger
    missing: tuple[str, ...]
    label: str
    pad_name: str = PAD_METHOD
    rollback_name: Optional[str] = None

    def pad_hook(self) -> Callable[[FrameView], PadOutcome]:
        """A ``Policy.pad_hook``: build the stand-in for a frame and run the real pad method.

        Called on one frame, collectives assume a busy peer (``replay.collectives``);
        the hook's ``fleet`` attribute runs a whole iteration in lockstep instead, with the
        collectives computed over the replayed ranks (the engine uses it).
        """
        def hook(frame: FrameView) -> PadOutcome:
            self.logger.records.clear()
            executor = self.executor_class(frame)
            return call_pad(executor, getattr(executor, self.pad_name), self.logger, self.label)

        def fleet(views: list[FrameView], role_context: Optional[bool] = None) -> list[PadOutcome]:
            return run_fleet(self.executor_class, views, self.pad_name, self.logger, self.label,
                             role_context=role_context)
        hook.__qualname__ = f"trtllm_pad_hook[{self.label}]"
        hook.fleet = fleet  # type: ignore[attr-defined]
        return hook

    def rolls_back(self, config: RunConfig) -> Optional[bool]:
        """Whether the source's rollback removes a dummy padded this iteration when the fleet
        skips, for runs of ``config``: probed by running the real pad on an empty rank with
        ``expected`` 1 and then the real rollback with ``can_queue`` False. None when the probe
        pads nothing (the answer is then the catalogue loop's)."""
        if self.rollback_name is None:
            return False
        frame = FrameView(iter=0, rank=0, requests=(), expected=1, config=config)
        self.logger.records.clear()
        executor = self.executor_class(frame)
        try:
            getattr(executor, self.pad_name)()
            added = [r for r in executor.active_requests if r.is_attention_dp_dummy]
            if not added:
                return None
            getattr(executor, self.rollback_name)(False)
        except PolicyError:
            raise
        except Exception:  # the probe itself failed: no answer from the code
            return None
        return added[0] not in executor.active_requests


def compile_extracted(ex: Extracted) -> CompiledSource:
    """Compile only the extracted function definitions, bound to stand-in classes."""
    logger = RecordingLogger()
    ns, missing = _namespace(logger, [*ex.methods.values(), *ex.module_functions.values()],
                             set(ex.module_functions), ex.label)
    _compile_into(ns, ex.module_functions, ex.label, ex.owner_file, ex.executor_text)
    methods = _compile_into(ns, ex.methods, ex.label, ex.owner_file, ex.executor_text)
    for name in ex.methods:
        ns.pop(name, None)  # methods are not module globals upstream either
    scheduler_class: type = StandinScheduler
    if ex.scheduler_methods:
        sns, smissing = _namespace(logger, [*ex.scheduler_methods.values(),
                                            *ex.scheduler_functions.values()],
                                   set(ex.scheduler_functions), ex.label)
        missing = sorted(set(missing) | set(smissing))
        _compile_into(sns, ex.scheduler_functions, ex.label, "scheduler", ex.scheduler_text)
        smethods = _compile_into(sns, ex.scheduler_methods, ex.label, "scheduler",
                                 ex.scheduler_text)
        for name in ex.scheduler_methods:
            sns.pop(name, None)
        scheduler_class = type("ExtractedScheduler", (StandinScheduler,), smethods)
    executor_class = type("ExtractedExecutor", (StandinExecutor,),
                          {**methods, "scheduler_class": scheduler_class})
    return CompiledSource(executor_class=executor_class, logger=logger, missing=tuple(missing),
                          label=ex.label, pad_name=ex.pad_name, rollback_name=ex.rollback_name)


@dataclasses.dataclass(frozen=True)
class SourcePolicy(Policy):
    """A catalogue loop around real pad code; the rollback and the assumptions come from the code.

    Fields (besides :class:`Policy`'s):
        rollback_probe: ``config -> bool | None`` (:meth:`CompiledSource.rolls_back`); None
            answers defer to the catalogue loop.
        flags_read: executor flags the extracted code reads (for :meth:`assumptions`).
        names_read: every attribute name and string constant in the extracted functions (the
            executor's, the scheduler's, module-level ones), for :meth:`config_seen`.
    """

    rollback_probe: Optional[Callable[[RunConfig], Optional[bool]]] = dataclasses.field(
        default=None, compare=False, repr=False)
    flags_read: frozenset[str] = frozenset()
    names_read: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)

    def rolls_back(self, config: RunConfig) -> bool:
        answer = self.rollback_probe(config) if self.rollback_probe is not None else None
        return Policy.rolls_back(self, config) if answer is None else bool(answer)

    def model_dependent(self, config: RunConfig) -> tuple[str, ...]:
        """The models whose gates the extracted code reads, when the run does not name its model
        and the gates are otherwise open (a replay may then run once per model)."""
        if getattr(config, "model_arch", None) or not (config.disaggregated
                                                       and config.pp_size == 1):
            return ()
        models: list[str] = []
        if "_enable_dsv4_adp_dummy_fixes" in self.flags_read:
            models += DSV4_MODELS
        if "_enable_scheduler_aware_adp_dummy" in self.flags_read and config.overlap_scheduler:
            models += SCHEDULER_AWARE_OVERLAP_MODELS
        return tuple(dict.fromkeys(models))

    def assumptions(self, config: RunConfig) -> list[str]:
        """What the replay of this run had to guess (model gates the run record leaves open)."""
        return model_assumptions(config, set(self.flags_read))

    def config_seen(self, config: RunConfig) -> object:
        """What the extracted code can tell of ``config``: the stand-in's sizes, transceiver and
        window, and the flags it names (``replay.feature_flags.config_seen``)."""
        return config_seen(config, self.names_read)


# --------------------------------------------------------------------------- policies

def policy_from_source(source: SourceText, name: str) -> Policy:
    """A hooked :class:`Policy`: the real pad code of ``source`` plus its era's catalogue loop.

    The cap follows the source (:func:`~replay.era.find_cap`), the rollback on a skip is the
    source's own (probed per run configuration), the model gates are read from the run record
    at replay time (``SourcePolicy.assumptions`` lists what had to be guessed).
    """
    extracted = extract(source)
    era = detect_era(extracted.methods, extracted.class_methods, extracted.cap,
                     pad=extracted.pad_name)
    compiled = compile_extracted(extracted)
    base = get_policy(era.policy)
    where = (f"{extracted.owner}.{extracted.pad_name}" if extracted.owner != "PyExecutor"
             else "")
    notes = [f"real pad code from {source.label}{' (' + where + ')' if where else ''}; rest of "
             f"the loop from catalogue policy {base.name} ({'; '.join(era.reasons)})",
             "extracted: " + ", ".join([*extracted.methods, *extracted.scheduler_methods])]
    if compiled.missing:
        notes.append("names the stand-in lacks (fail only if reached): "
                     + ", ".join(compiled.missing))
    dropped = dropped_decorators([*extracted.methods.values(), *extracted.module_functions.values(),
                                  *extracted.scheduler_methods.values(),
                                  *extracted.scheduler_functions.values()])
    if dropped:
        notes.append("decorators dropped unevaluated: " + ", ".join(dropped))
    read = set().union(*(attr_names(f) for f in [*extracted.methods.values(),
                                                 *extracted.scheduler_methods.values()]))
    read |= {"_" + n for n in read}  # a loop task's _ctx.config names flags without the "_"
    notes.extend(f"{flag}: {text} when the run record names no model"
                 for flag, text in MODEL_ASSUMPTIONS.items() if flag in read)
    if extracted.rollback_name:
        notes.append(f"the source defines {extracted.rollback_name}: whether a pending dummy is "
                     "rolled back on a skip is probed from the code for each run configuration")
    log.info("%s: era %s (%s)", source.label, base.name, "; ".join(era.reasons))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(Policy)}
    fields.update(name=name, title=f"TensorRT-LLM source {source.label}", notes=" | ".join(notes),
                  pad_hook=compiled.pad_hook(), source=f"{source.label} [era: {base.name}]",
                  cap=era.cap)
    everything = [*extracted.methods.values(), *extracted.module_functions.values(),
                  *extracted.scheduler_methods.values(), *extracted.scheduler_functions.values()]
    return SourcePolicy(**fields, rollback_probe=compiled.rolls_back,
                        flags_read=frozenset(read & set(FEATURE_FLAGS)),
                        names_read=frozenset().union(*map(names_read, everything)))


def era_of(policy: Policy) -> Optional[str]:
    """The catalogue policy a ``trtllm:`` policy took its loop from (from ``Policy.source``)."""
    head, sep, tail = policy.source.rpartition(" [era: ")
    return tail.rstrip("]") if sep else None


def resolve_trtllm(spec: str) -> Policy:
    """Resolve ``trtllm:PATH[@REV]`` or ``trtllm:installed`` to a hooked policy."""
    path, rev = parse_spec(spec)
    return policy_from_source(load_source(path, rev), name=spec)
