"""Health rules in CEL: ``spec.healthChecks`` on a Cluster (the operator's, for every
Release on it) and on a Release (its author's, for its own objects), with the semantics
of Flux's ``healthCheckExprs`` (flux2 RFC-0009). No I/O.

The observer asks :meth:`Rules.find` for a rule before it falls back to the built-in
:func:`convoy_batch.health.builtin.compute`. Precedence: the Release's rule for a (group, kind),
else the Cluster's, else the built-in rules; a rule replaces the built-in one for its
kind. ``apiVersion``'s version does not count (Flux matches on group and kind too).

:func:`evaluate` decides in this order, the first that decides wins:

1. ``metadata.deletionTimestamp`` set                   -> Terminating
2. ``status.observedGeneration`` set and not ``metadata.generation`` -> InProgress
3. ``inProgress``, ``failed``, ``current`` (the ones given), in this order: the first
   that is true gives InProgress, Failed, Current
4. none is true                                         -> InProgress

The expressions see the object's top-level fields as variables (``status``,
``metadata``, ``spec``, ...), as in Flux; a field the object lacks is an error, so
``status.conditions`` fails on an object with no status yet, and so does
``has(status.conditions)`` (``has`` guards fields below the top level). Beyond Flux,
``self`` is the whole object, as in Kubernetes' own CEL rules, so ``!has(self.status)``
can say "no status yet" (only the fields an expression names are handed to CEL). An
expression that does not compile, fails, or is not a boolean makes the health Unknown
(never Current), its message naming the rule's file and field and the error.

Expressions are compiled once per tick, on their first evaluation (:class:`Programs`,
one per tick, by expression text, and the rules by where they are written). The CEL
library is imported on the first compile: a tick that evaluates nothing never pays for
its import (about 0.4 s, most of it the library's command line).

A result is remembered across ticks in a :class:`Memo` (the tick's
``<state>/cache/health-<cluster>.json``). Key: the object's group, kind, namespace and
name. Signature: a digest of the CEL library's version, the rule's origin and
expressions, and the whole object. Invariant: the result of steps 3-4 is a function of
exactly those, so an equal signature gives the result evaluating would give. An object
that is not plain data (a datetime a YAML loader made) is evaluated and not remembered.
Handing an object to CEL costs about 2.5 us per string or map entry (the binding tries
the other types first), some 100 us for a Deployment; its digest, about 10 us: a quiet
tick pays the digest only.
"""

import hashlib
import json
import marshal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from convoy_batch.kinds import group_of
from convoy_batch.models import Cluster, HealthCheck, HealthState, Release

if TYPE_CHECKING:
    import cel

Result = tuple[HealthState, str]
SELF = "self"
"""The variable that holds the whole object."""
MARSHAL_VERSION = 2
"""How an object is serialized for its digest: marshal, the fastest faithful encoding of
plain data in the standard library (equal bytes are equal values), three times faster than
JSON. Version 2 is the last without back-references: later ones use them for an object
that has other references, so the same object would give other bytes in another process."""
MESSAGE_LIMIT = 300
"""An error message is cut to this many characters (parse errors quote the expression)."""


def _one_line(exc: Exception) -> str:
    """The library's error on one line: its first line, whitespace collapsed, cut."""
    text = str(exc).strip()
    if isinstance(exc, KeyError):  # str() of a KeyError is the bare key
        text = f"no such key: {text}"
    first = " ".join((text.splitlines() or [type(exc).__name__])[0].split())
    return first if len(first) <= MESSAGE_LIMIT else first[: MESSAGE_LIMIT - 3] + "..."


@dataclass(frozen=True)
class Compiled:
    """One compiled expression, or why it does not compile."""

    program: "cel.Program | None"
    error: str | None = None
    variables: frozenset[str] = frozenset()
    """The names it reads: only these top-level fields are handed to CEL."""
    functions: frozenset[str] = frozenset()


def _compile(text: str) -> Compiled:
    import cel  # the library's import costs ~0.1 s (its command line): only with rules

    try:
        program = cel.compile(text)
    except Exception as exc:  # the library reports what it refuses in several types
        return Compiled(None, _one_line(exc))
    # ``functions()`` names ``math.greatest`` as ``greatest``
    return Compiled(program, None, frozenset(program.variables()), frozenset(program.functions()))


def _extensions(called: frozenset[str]) -> dict[str, Callable[..., Any]]:
    """The library's extension functions (cel-go's strings, math, lists, sets, encoders:
    not in the CEL core it evaluates natively) that a rule calls; registering only
    those keeps an object's context cheap."""
    from cel.stdlib import EXTENSIONS

    return {
        name: function
        for library in EXTENSIONS.values()
        for name, function in library.items()
        if name.rsplit(".", 1)[-1] in called
    }


_ORDER: tuple[tuple[str, str, HealthState], ...] = (
    ("in_progress", "inProgress", HealthState.IN_PROGRESS),
    ("failed", "failed", HealthState.FAILED),
    ("current", "current", HealthState.CURRENT),
)
"""RFC-0009's evaluation order: (model field, YAML field, the state it gives)."""


@dataclass(frozen=True)
class Rule:
    """A health rule in force, with where it was written; compiled on first use."""

    origin: str
    """The file and field, e.g. ``releases/web.yaml spec.healthChecks[0]``."""
    check: HealthCheck
    programs: "Programs" = field(repr=False, compare=False)
    """The tick's compiled expressions, which this rule's are taken from."""

    @cached_property
    def expressions(self) -> tuple[tuple[str, HealthState, Compiled], ...]:
        """(YAML field, state, program), in evaluation order; absent expressions left out."""
        return tuple(
            (name, state, self.programs.get(text))
            for attribute, name, state in _ORDER
            if (text := getattr(self.check, attribute)) is not None
        )

    @cached_property
    def variables(self) -> frozenset[str]:
        return frozenset().union(*(p.variables for _, _, p in self.expressions))

    @cached_property
    def functions(self) -> Mapping[str, Callable[..., Any]]:
        called = frozenset().union(*(p.functions for _, _, p in self.expressions))
        return _extensions(called) if called else {}

    @cached_property
    def signature(self) -> bytes:
        """What a result depends on besides the object (see the module doc)."""
        texts = [(name, getattr(self.check, attribute)) for attribute, name, _ in _ORDER]
        return json.dumps([self.programs.library, self.origin, texts]).encode()


class Memo(Protocol):
    """Results remembered across ticks, by key and signature (the tick gives its parse
    cache for the Cluster, :class:`convoy_batch.state.caches.ParseCache`)."""

    def get(self, key: str, signature: str) -> Any | None: ...

    def put(self, key: str, signature: str, data: Any) -> None: ...


@dataclass
class Programs:
    """The tick's compiled expressions, by text, and compiled rules, by where they are
    written: each is compiled once per tick, however many Releases and objects use it (a
    Cluster's rules serve every Release on it). Two threads may compile the same one at
    once; both get an equal one."""

    library: str = ""
    """The CEL library and its version (the tick names them): part of every remembered
    result's signature, so an upgrade evaluates again."""
    compiled: dict[str, Compiled] = field(default_factory=dict)
    rules: dict[tuple[str, HealthCheck], Rule] = field(default_factory=dict)

    def get(self, text: str) -> Compiled:
        found = self.compiled.get(text)
        if found is None:
            found = self.compiled[text] = _compile(text)
        return found

    def rule(self, check: HealthCheck, origin: str) -> Rule:
        found = self.rules.get((origin, check))
        if found is None:
            found = self.rules[(origin, check)] = Rule(origin, check, self)
        return found


@dataclass(frozen=True)
class Rules:
    """The rules in force for one Release's objects, by (group, kind)."""

    by_kind: Mapping[tuple[str, str], Rule] = field(default_factory=dict)
    memo: Memo | None = None
    """Where results are remembered across ticks; None: evaluated every time."""

    def find(self, obj: Mapping[str, Any]) -> Rule | None:
        if not self.by_kind:
            return None
        group = group_of(str(obj.get("apiVersion") or ""))
        return self.by_kind.get((group, str(obj.get("kind") or "")))


NO_RULES = Rules()


def rules_for(
    release: Release, cluster: Cluster | None, programs: Programs, memo: Memo | None = None
) -> Rules:
    """The rules for ``release``'s objects: its own over its Cluster's, their results
    remembered in ``memo``."""
    by_kind: dict[tuple[str, str], Rule] = {}
    sources = [(f"releases/{release.name}.yaml", release.spec.health_checks)]
    if cluster is not None:
        sources.insert(0, (f"clusters/{cluster.name}.yaml", cluster.spec.health_checks))
    for path, checks in sources:  # the Release last: its rules replace the Cluster's
        for index, check in enumerate(checks):
            origin = f"{path} spec.healthChecks[{index}]"
            by_kind[(check.group, check.kind)] = programs.rule(check, origin)
    return Rules(by_kind, memo) if by_kind else NO_RULES


def _generation_lag(obj: Mapping[str, Any]) -> tuple[int, int] | None:
    """(generation, observedGeneration) when both are set and differ (RFC-0009)."""
    status, metadata = obj.get("status"), obj.get("metadata")
    observed = status.get("observedGeneration") if isinstance(status, Mapping) else None
    generation = metadata.get("generation") if isinstance(metadata, Mapping) else None
    if isinstance(observed, int) and isinstance(generation, int) and observed != generation:
        return generation, observed
    return None


def _context(rule: Rule, obj: Mapping[str, Any]) -> "cel.Context":
    import cel

    variables = {name: obj[name] for name in rule.variables if name in obj}
    if SELF in rule.variables:
        variables[SELF] = obj
    return cel.Context(variables, dict(rule.functions))


def _unknown(kind: str, rule: Rule, name: str, why: str) -> Result:
    return HealthState.UNKNOWN, f"{kind}: health rule {rule.origin}.{name}: {why}"


def evaluate(rule: Rule, obj: Mapping[str, Any], memo: Memo | None = None) -> Result:
    """The health of a live object under ``rule`` and why (see the module doc); the
    expressions' result remembered in ``memo``, or taken from it."""
    kind = str(obj.get("kind") or "")
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("deletionTimestamp"):
        return HealthState.TERMINATING, f"{kind}: being deleted"
    if lag := _generation_lag(obj):
        return HealthState.IN_PROGRESS, f"{kind}: generation {lag[0]} not yet observed ({lag[1]})"
    entry = _memo_entry(rule, obj) if memo is not None else None
    if memo is None or entry is None:
        return _expressions(rule, obj, kind)
    key, signature = entry
    remembered = _result(memo.get(key, signature))
    if remembered is None:
        remembered = _expressions(rule, obj, kind)
        memo.put(key, signature, [remembered[0].value, remembered[1]])
    return remembered


def _expressions(rule: Rule, obj: Mapping[str, Any], kind: str) -> Result:
    """Steps 3-4 of the module doc."""
    programs = []
    for name, state, compiled in rule.expressions:  # a rule that does not compile is not used
        if compiled.program is None:
            return _unknown(kind, rule, name, compiled.error or "does not compile")
        programs.append((name, state, compiled.program))
    context = _context(rule, obj)
    for name, state, program in programs:
        try:
            value = program.execute(context)
        except Exception as exc:  # whatever the expression does wrong, it is its error
            return _unknown(kind, rule, name, _one_line(exc))
        if not isinstance(value, bool):
            return _unknown(kind, rule, name, f"gave {type(value).__name__}, not a boolean")
        if value:
            return state, f"{kind}: {name} is true ({rule.origin})"
    return HealthState.IN_PROGRESS, f"{kind}: no health expression is true yet ({rule.origin})"


def _memo_entry(rule: Rule, obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (key, signature) of the object's result in a memo (see the module doc); None
    when the object is not plain data."""
    if not isinstance(obj, dict):
        return None
    try:
        data = marshal.dumps(obj, MARSHAL_VERSION)
    except ValueError:  # holds a datetime or another type marshal does not encode
        return None
    digest = hashlib.blake2b(rule.signature, digest_size=16)
    digest.update(data)
    metadata = obj.get("metadata")
    names = metadata if isinstance(metadata, Mapping) else {}
    key = "/".join(
        str(part or "")
        for part in (
            group_of(str(obj.get("apiVersion") or "")),
            obj.get("kind"),
            names.get("namespace"),
            names.get("name"),
        )
    )
    return key, digest.hexdigest()


def _result(data: Any) -> Result | None:
    """A remembered result; None when absent or not one (never trusted half-read)."""
    if isinstance(data, list) and len(data) == 2 and all(isinstance(x, str) for x in data):
        try:
            return HealthState(data[0]), data[1]
        except ValueError:
            return None
    return None
