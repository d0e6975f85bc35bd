"""Fault switches for tests: parsing `NAME[=VALUE][:N]` specs and deciding, persistently, when they fire."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from legacy_backend.store import Store

LATENCY = "latency"
FAIL_BEFORE_WRITE = "fail-before-write"
DROP_AFTER_WRITE = "drop-after-write"
MALFORMED_AFTER_WRITE = "malformed-after-write"
DEEP_AFTER_WRITE = "deep-after-write"
HUGE_AFTER_WRITE = "huge-after-write"
STRING_VERSION_AFTER_WRITE = "string-version-after-write"

AFTER_WRITE = (DROP_AFTER_WRITE, MALFORMED_AFTER_WRITE, DEEP_AFTER_WRITE, HUGE_AFTER_WRITE, STRING_VERSION_AFTER_WRITE)
FAULT_NAMES = (LATENCY, FAIL_BEFORE_WRITE, *AFTER_WRITE)
ENV_VAR = "LEGACY_FAULT"

VALUES: dict[str, tuple[str, int | None]] = {
    LATENCY: ("the latency in milliseconds", None),
    DEEP_AFTER_WRITE: ("the nesting depth", 100_000),
    HUGE_AFTER_WRITE: ("the answer's size in bytes", None),
}
"""Faults that take ``=VALUE``: what the value means, and its default (None: the value is required)."""


@dataclass(frozen=True)
class FaultSpec:
    """One fault switch: its name, optional value (see VALUES) and fire limit (None = always)."""

    name: str
    value: int | None = None
    limit: int | None = None


def _parse_int(text: str, what: str, spec: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"invalid fault spec {spec!r}: {what} must be an integer") from None
    if number < 0:
        raise ValueError(f"invalid fault spec {spec!r}: {what} must not be negative")
    return number


def parse_fault_spec(spec: str) -> FaultSpec:
    """Parse one `NAME[=VALUE][:N]` spec; ValueError with a readable message if it is invalid."""
    text = spec.strip()
    limit: int | None = None
    head, sep, tail = text.rpartition(":")
    if sep:
        limit = _parse_int(tail, "the fire count N", spec)
        text = head
    name, sep, value_text = text.partition("=")
    if name not in FAULT_NAMES:
        known = ", ".join(FAULT_NAMES)
        raise ValueError(f"invalid fault spec {spec!r}: unknown fault {name!r} (known: {known})")
    value: int | None = None
    if name in VALUES:
        meaning, default = VALUES[name]
        if not sep and default is None:
            raise ValueError(f"invalid fault spec {spec!r}: {name} needs a value, e.g. {name}=500")
        value = _parse_int(value_text, meaning, spec) if sep else default
    elif sep:
        raise ValueError(f"invalid fault spec {spec!r}: {name} takes no value")
    return FaultSpec(name=name, value=value, limit=limit)


def parse_fault_specs(specs: Iterable[str]) -> dict[str, FaultSpec]:
    """Parse several specs into name -> spec; a later spec for the same name wins."""
    return {fault.name: fault for fault in (parse_fault_spec(s) for s in specs if s.strip())}


def specs_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The comma-separated specs in LEGACY_FAULT."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [part for part in (p.strip() for p in value.split(",")) if part]


class Faults:
    """Decides whether each configured fault fires, counting fires in the database."""

    def __init__(self, specs: Mapping[str, FaultSpec], store: Store) -> None:
        """Bind the configured specs to the store that persists their fire counts."""
        self._specs = dict(specs)
        self._store = store

    @property
    def specs(self) -> list[FaultSpec]:
        """The configured specs."""
        return list(self._specs.values())

    def _claim(self, name: str) -> bool:
        spec = self._specs.get(name)
        return spec is not None and self._store.claim_fault(name, spec.limit)

    def _claim_now(self, name: str) -> bool:
        if name not in self._specs:
            return False
        with self._store.transaction():
            return self._claim(name)

    def latency_seconds(self) -> float:
        """Seconds to sleep before this write (0 if the latency fault does not fire)."""
        if not self._claim_now(LATENCY):
            return 0.0
        return (self._specs[LATENCY].value or 0) / 1000

    def fail_before_write(self) -> bool:
        """True if this write must fail before touching storage."""
        return self._claim_now(FAIL_BEFORE_WRITE)

    def value(self, name: str) -> int:
        """The configured value of a fault (0 when it has none)."""
        spec = self._specs.get(name)
        return 0 if spec is None or spec.value is None else spec.value

    def after_write(self) -> str | None:
        """The after-write fault that fires for this write, claimed inside the caller's write transaction."""
        for name in AFTER_WRITE:
            if self._claim(name):
                return name
        return None
