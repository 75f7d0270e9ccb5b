"""The base of every model (camelCase aliases, unknown fields refused, immutable), the
labels and annotations convoy-batch writes, the value types every kind shares (names,
durations, times), and the one-line message of a validation error. Pure."""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    ValidationError,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from convoy_batch.names import is_label
from convoy_batch.timefmt import format_duration, format_time, parse_duration, parse_time

API_VERSION = "convoy.dev/v1alpha1"
LABEL_RELEASE = "convoy.dev/release"
LABEL_RELEASE_SET = "convoy.dev/release-set"
"""The label of a ReleaseSet member (its Release's metadata): the set's name."""
ANNOTATION_RENDER = "convoy.dev/render"
ANNOTATION_FORCE_SYNC = "convoy.dev/force-sync"
ANNOTATION_SYNC_WAVE = "convoy.dev/sync-wave"
ANNOTATION_HOOK = "convoy.dev/hook"
ANNOTATION_PRUNE = "convoy.dev/prune"
HOOK_FINALIZER = "convoy.dev/hook-finalizer"
"""The finalizer every hook is created with on a Kubernetes Cluster, removed once its end
is on record: a Job that deletes itself once finished (``ttlSecondsAfterFinished``) is
still read finished (``stages/hooks.py``)."""
HISTORY_LIMIT = 10

Duration = Annotated[
    timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
Time = Annotated[
    datetime, BeforeValidator(parse_time), PlainSerializer(format_time, return_type=str)
]


def _dns1123_label(name: str) -> str:
    if not is_label(name):
        raise ValueError(f"{name!r} is not a DNS-1123 label (lower case a-z, 0-9, '-', max 63)")
    return name


def _scalar_to_str(value: Any) -> Any:
    """Variables are substituted as text: YAML numbers and booleans become their text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def field_error(model: str, field: str, message: str) -> ValidationError:
    """A validation error of a model validator, placed at ``field`` (so the message
    names the field's whole path, as a field's own validator would)."""
    kind = PydanticCustomError("value_error", message)
    return ValidationError.from_exception_data(
        model, [InitErrorDetails(type=kind, loc=(field,), input=None)]
    )


Name = Annotated[str, AfterValidator(_dns1123_label)]
VarValue = Annotated[str, BeforeValidator(_scalar_to_str)]


class Model(BaseModel):
    """Base of every model: camelCase aliases, unknown fields refused, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def dump(self) -> dict[str, Any]:
        """The JSON-compatible form with YAML field names, as stored."""
        return self.model_dump(mode="json", by_alias=True)


# --- Errors of validation, one line ----------------------------------------------------


def describe_validation_error(source: str, error: ValidationError) -> str:
    """One line naming the file and the field path of every problem pydantic found."""
    parts = []
    for err in error.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field missing"
        parts.append(f"{loc or '<root>'}: {msg}")
    return f"{source}: " + "; ".join(parts)


M = TypeVar("M", bound=Model)


def parse_model(model: type[M], data: Mapping[str, Any] | Any, source: str) -> M:
    """Validate ``data`` as ``model``; a failure raises ValueError with a one-line message."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(source, exc)) from None
