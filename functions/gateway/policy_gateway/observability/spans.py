"""A span's side of tracing: its annotations (searchable in X-Ray), its plain attributes, its end.

X-Ray indexes only the span attributes whose keys the span lists in its
`aws.xray.annotations` attribute; every other attribute becomes metadata,
which filter expressions cannot search. `Span.annotate` does both. Every
string attribute goes through the audit record's bound (recorder.text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gateway_policies import recorder

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OTelSpan

# The span attribute that lists the keys X-Ray indexes as annotations.
XRAY_ANNOTATIONS = "aws.xray.annotations"


class Span(Protocol):
    def annotate(self, key: str, value: bool | int | float | str) -> None: ...

    def describe(self, key: str, value: str) -> None: ...

    def end(self, error: BaseException | None = None) -> None: ...


class _NoSpan:
    def annotate(self, key: str, value: bool | int | float | str) -> None:
        pass

    def describe(self, key: str, value: str) -> None:
        pass

    def end(self, error: BaseException | None = None) -> None:
        pass


NO_SPAN = _NoSpan()


class AttemptSpan:
    """An OpenTelemetry span whose annotations X-Ray indexes; ending it twice is harmless."""

    def __init__(self, span: OTelSpan) -> None:
        self._span = span
        self._annotations: list[str] = []
        self._open = True

    def annotate(self, key: str, value: bool | int | float | str) -> None:
        if not self._open:
            return
        self._span.set_attribute(key, _bounded(value))
        if key not in self._annotations:
            self._annotations.append(key)
            self._span.set_attribute(XRAY_ANNOTATIONS, self._annotations)

    def describe(self, key: str, value: str) -> None:
        """A plain attribute: shown with the span (X-Ray metadata), not indexed for search."""
        if self._open:
            self._span.set_attribute(key, recorder.text(value))

    def end(self, error: BaseException | None = None) -> None:
        if not self._open:
            return
        self._open = False
        if error is not None:
            # The type only: an exception's message or stack may quote a URL or a header.
            mark_error(self._span, type(error).__name__)
        self._span.end()


def _bounded(value: bool | int | float | str) -> bool | int | float | str:
    return recorder.text(value) if isinstance(value, str) else value


def mark_error(span: OTelSpan, error_type: str) -> None:
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(StatusCode.ERROR)
