"""Function definitions from an untrusted source, made safe to *define* (issue #14 item 6).

Executing a ``def`` statement runs code before the function is ever called: its decorators, its
default values (positional and keyword-only) and, without postponed evaluation, its annotations.
A source read by ``trtllm:PATH`` is only *resolved* when a policy is built, so none of that may
run. :func:`sanitize` rewrites one extracted definition so that executing it binds a function and
does nothing else:

* every default must be a literal (``None``, numbers, strings, tuples/lists/dicts/sets of
  literals, ``-1``); anything else is refused with a :class:`PolicyError` naming the function,
  the argument and the line;
* decorators are removed from the tree. The known ones (``property``, ``staticmethod``,
  ``classmethod``) are applied afterwards by :func:`apply_decorators` from this module's own
  table, never looked up in the source's namespace (a module-level ``def property`` cannot
  take their place); any other decorator (``nvtx_range(...)``) is dropped, unevaluated, and
  listed in the policy's notes;
* annotations and type parameters are removed.

What stays is the function body, which runs only when the replay calls it: ``replay`` and
``bisect`` do execute it, like ``git bisect run`` executes the tree it checks out. The namespace
the bodies see (:data:`SAFE_BUILTINS`, ``replay.standin_namespace.base_namespace``) is built from
the stand-in, not from the source's module globals; it is not a sandbox (``replay.isolation`` is
the confinement, ``--isolate``).
"""
from __future__ import annotations

import ast
import builtins
import copy
from typing import Any

from replay.errors import PolicyError

#: The decorators a replayed definition may carry, resolved here (never from the source).
KNOWN_DECORATORS: dict[str, Any] = {
    "property": builtins.property,
    "staticmethod": builtins.staticmethod,
    "classmethod": builtins.classmethod,
}

#: Builtins the extracted bodies may use. Absent on purpose: ``open``, ``exec``, ``eval``,
#: ``compile``, ``__import__``, ``globals``, ``locals``, ``vars``, ``input``, ``breakpoint``,
#: ``exit``/``quit``, ``help``. A body reaching one fails with a PolicyError naming it.
SAFE_BUILTINS: dict[str, Any] = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate", "filter", "float",
    "format", "frozenset", "getattr", "hasattr", "hash", "id", "int", "isinstance", "issubclass",
    "iter", "len", "list", "map", "max", "min", "next", "object", "print", "range", "repr",
    "reversed", "round", "set", "setattr", "slice", "sorted", "str", "sum", "tuple", "type", "zip",
    "property", "staticmethod", "classmethod", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError", "KeyError",
    "LookupError", "NotImplementedError", "OverflowError", "RuntimeError", "StopIteration",
    "TypeError", "ValueError", "ZeroDivisionError",
)}

_ACCESSORS = ("setter", "getter", "deleter")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def is_literal(node: ast.AST) -> bool:
    """True for what ``ast.literal_eval`` accepts without names: evaluating it runs no code."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and is_literal(k) for k in node.keys) and \
            all(is_literal(v) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and \
            isinstance(node.operand.value, (int, float, complex))
    return False


def _refuse(label: str, what: str, fn: ast.AST, node: ast.AST, construct: str) -> PolicyError:
    text = ast.unparse(node)
    text = text if len(text) <= 60 else text[:57] + "..."
    return PolicyError(
        f"{label}: {what}, line {getattr(node, 'lineno', '?')}: {construct} of "
        f"{getattr(fn, 'name', '?')} is not a literal ({text}); it would run while the "
        "definition is only being loaded",
        hint="trtllm: sources may use only literal defaults; refusing rather than running it")


def _check_defaults(fn: ast.FunctionDef, label: str, what: str) -> None:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if not is_literal(default):
            raise _refuse(label, what, fn, default, f"the default of argument {arg.arg!r}")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None and not is_literal(default):
            raise _refuse(label, what, fn, default,
                          f"the default of keyword-only argument {arg.arg!r}")


def _strip_annotations(fn: ast.FunctionDef) -> None:
    args = fn.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    fn.returns = None
    if hasattr(fn, "type_params"):
        fn.type_params = []


def sanitize(fn: ast.FunctionDef, label: str, what: str) -> ast.FunctionDef:
    """A copy of ``fn`` whose definition runs nothing (see the module docstring).

    The copy carries ``kept_decorators`` (known names, outermost first) and
    ``dropped_decorators`` (source text of the others) as plain attributes.

    Raises:
        PolicyError: a default is not a literal (names the function, argument and line).
    """
    _check_defaults(fn, label, what)
    out = copy.deepcopy(fn)
    kept: list[str] = []
    dropped: list[str] = []
    for d in fn.decorator_list:
        if isinstance(d, ast.Name) and d.id in KNOWN_DECORATORS:
            kept.append(d.id)
        elif not (isinstance(d, ast.Attribute) and d.attr in _ACCESSORS):
            dropped.append(ast.unparse(d))
    out.decorator_list = []
    _strip_annotations(out)
    out.kept_decorators = tuple(kept)  # type: ignore[attr-defined]
    out.dropped_decorators = tuple(dropped)  # type: ignore[attr-defined]
    return out


def apply_decorators(obj: Any, fn: ast.AST) -> Any:
    """Wrap a defined function in its known decorators, innermost first, from our own table."""
    for name in reversed(getattr(fn, "kept_decorators", ())):
        obj = KNOWN_DECORATORS[name](obj)
    return obj


def dropped_decorators(fns: list[ast.AST]) -> list[str]:
    """``NAME: @decorator`` for every decorator :func:`sanitize` dropped."""
    return [f"{fn.name}: @{d}" for fn in fns  # type: ignore[attr-defined]
            for d in getattr(fn, "dropped_decorators", ())]


def definition_only(fn: ast.AST) -> bool:
    """True when executing ``fn`` as a statement can only bind a name (checked before exec)."""
    return (isinstance(fn, _FUNCTIONS) and not fn.decorator_list and fn.returns is None
            and all(is_literal(d) for d in fn.args.defaults)
            and all(d is None or is_literal(d) for d in fn.args.kw_defaults))
