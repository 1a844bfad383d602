"""Validates request bodies the server sends to model providers against the
providers' official Python SDKs' request types (PyPI `openai` and
`anthropic`, pinned in xtask), unmodified.

    python provider_bodies.py < BODIES

BODIES holds one JSON object per line: `{"kind": "openai" | "anthropic",
"body": {...}}`. An OpenAI body is checked against
`openai.types.chat.completion_create_params.CompletionCreateParamsStreaming`
(`...NonStreaming` when its `stream` is false), an Anthropic body against
`anthropic.types.message_create_params.MessageCreateParamsStreaming`
(`...NonStreaming` likewise), with pydantic's `TypeAdapter`.

The SDKs' types are TypedDicts, which pydantic validates loosely in two
ways, both made strict here:
- keys a TypedDict does not declare are ignored: every TypedDict reachable
  from the request type gets `extra='forbid'` (through the
  `__pydantic_config__` pydantic reads on a TypedDict), so a misspelt or
  invented key fails;
- an `Iterable[...]` field (`messages`, a message's content parts) is
  validated lazily, item by item as it is iterated: the validated result is
  walked and every such iterator consumed, so each item is checked.

Prints one line per failure, `body N (kind): location: message` (N counts
the lines from 0), and exits 1 when any body fails; else prints how many
bodies were valid.
"""

import json
import sys
import typing

import typing_extensions
import pydantic
from pydantic import TypeAdapter, ValidationError

from anthropic.types import message_create_params
from openai.types.chat import completion_create_params

TYPES = {
    ("openai", True): completion_create_params.CompletionCreateParamsStreaming,
    ("openai", False): completion_create_params.CompletionCreateParamsNonStreaming,
    ("anthropic", True): message_create_params.MessageCreateParamsStreaming,
    ("anthropic", False): message_create_params.MessageCreateParamsNonStreaming,
}

# `arbitrary_types_allowed`: a few file-upload params of the SDKs hold
# `IO[bytes]`, for which pydantic has no schema of its own.
STRICT = {"extra": "forbid", "arbitrary_types_allowed": True}
# The pydantic models made strict, innermost first (the order they are
# rebuilt in, before the request types' adapters are built).
MODELS = []


def forbid_extra_keys(tp, seen):
    """Gives every TypedDict and pydantic model reachable from `tp` the
    strict config. (The Anthropic SDK's content unions also take its
    response models, e.g. `ThinkingBlock`, which allow extra keys: left
    as they are, a block with an invented key would pass as one of them.)"""
    if isinstance(tp, type) and typing_extensions.is_typeddict(tp):
        if tp in seen:
            return
        seen.add(tp)
        tp.__pydantic_config__ = STRICT
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            forbid_extra_keys(hint, seen)
        return
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        if tp in seen:
            return
        seen.add(tp)
        tp.model_config = {**tp.model_config, **STRICT}
        for field in tp.model_fields.values():
            forbid_extra_keys(field.annotation, seen)
        MODELS.append(tp)
        return
    for arg in typing.get_args(tp):
        forbid_extra_keys(arg, seen)


def consume(value, path, errors):
    """Walks a validated value, consuming (and so validating) every lazy
    iterator; collects `(location, message)` of what fails."""
    if isinstance(value, dict):
        for key, item in value.items():
            consume(item, path + (key,), errors)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            consume(item, path + (index,), errors)
    elif hasattr(value, "__next__"):
        try:
            items = list(value)
        except ValidationError as error:
            errors.extend(located(error, path))
            return
        for index, item in enumerate(items):
            consume(item, path + (index,), errors)


def located(error, path):
    """The failures of `error` under `path`. A union's failure lists every
    member that did not fit; members whose discriminating literal (`type`,
    or a message's `role`) did not match are left out (unless nothing else
    is left), so what remains is why the member the body meant failed."""
    entries = [(path + tuple(e["loc"]), e["msg"], e["type"]) for e in error.errors()]
    ruled_out = {
        loc[:-1]
        for loc, _, kind in entries
        if loc and loc[-1] in ("type", "role") and kind == "literal_error"
    }
    kept = [
        (loc, msg)
        for loc, msg, _ in entries
        if not any(loc[: len(prefix)] == prefix for prefix in ruled_out)
    ]
    return kept or [(loc, msg) for loc, msg, _ in entries]


def validate(adapters, kind, body):
    if kind not in ("openai", "anthropic"):
        return [((), f"unknown kind {kind!r}")]
    if not isinstance(body, dict):
        return [((), "the body is not an object")]
    adapter = adapters[(kind, body.get("stream") is not False)]
    try:
        validated = adapter.validate_python(body)
    except ValidationError as error:
        return located(error, ())
    errors = []
    consume(validated, (), errors)
    return errors


def main():
    seen = set()
    for tp in TYPES.values():
        forbid_extra_keys(tp, seen)
    for model in MODELS:
        model.model_rebuild(force=True)
    adapters = {key: TypeAdapter(tp) for key, tp in TYPES.items()}
    failed = False
    count = 0
    for index, line in enumerate(sys.stdin):
        if not line.strip():
            continue
        count += 1
        try:
            entry = json.loads(line)
            kind, body = entry["kind"], entry["body"]
        except (ValueError, KeyError, TypeError) as error:
            print(f"body {index}: unreadable line: {error}")
            failed = True
            continue
        for loc, msg in validate(adapters, kind, body):
            where = ".".join(str(part) for part in loc) or "(body)"
            print(f"body {index} ({kind}): {where}: {msg}")
            failed = True
    if failed:
        sys.exit(1)
    print(f"{count} bodies valid")


if __name__ == "__main__":
    main()
