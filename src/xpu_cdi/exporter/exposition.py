"""The scrape's body: Prometheus's text format 0.0.4, or OpenMetrics 1.0.0 when asked.

Written here rather than by prometheus_client, whose package imports its
exposition module and with it ssl, urllib.request, wsgiref and http.server's
email: ~4 MiB of the exporter's resident memory for a few dozen lines of text
(issue 30).  Only gauges and counters, the only types the exporter has.  The
output is what prometheus_client 0.26 writes for the same families, byte for
byte (labels in name order, the formats' escapes, Go's number form); 0.16
wrote exponents of 10 and more as ``e+010``, which parses the same.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, List, Sequence, Tuple

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class Family:
    """One metric family: its samples are label values in :attr:`labels`' order, and a value."""

    __slots__ = ("name", "help", "labels", "unit", "kind", "samples")

    def __init__(self, name: str, help: str, labels: Sequence[str] = (), unit: str = "",  # noqa: A002
                 kind: str = "gauge") -> None:
        # a counter's name is its OpenMetrics family name; its sample (and 0.0.4's family) adds _total
        self.name, self.help, self.labels, self.unit, self.kind = name, help, list(labels), unit, kind
        self.samples: List[Tuple[Sequence[str], float]] = []

    def add(self, values: Sequence[str], value: float) -> None:
        self.samples.append((values, value))


def _escape_help(value: str) -> str:
    """The text format's HELP: backslashes and newlines."""
    return value.replace("\\", r"\\").replace("\n", r"\n")


def _escape_label(value: str) -> str:
    """A label value (and OpenMetrics' HELP): backslashes, newlines and double quotes."""
    return _escape_help(value).replace('"', r"\"")


def number(value: float) -> str:
    """A sample value as Go's shortest ``%g`` writes it (client_golang's, and prometheus_client's
    form): ``1.0``, ``0.25``, ``1.23456789e+08`` (an exponent from 1e6 on, where Python's repr waits
    for 1e16), ``1e-05``, ``+Inf``, ``NaN``."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    s = repr(value)
    if value >= 1e6 and "e" not in s:  # (negative values keep repr's form, as prometheus_client wrote them)
        dot = s.index(".")
        mantissa = (s[0] + "." + s[1:dot] + s[dot + 1:]).rstrip("0").rstrip(".")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _samples(f: Family, name: str) -> Iterable[str]:
    order = sorted(range(len(f.labels)), key=f.labels.__getitem__)
    for values, value in f.samples:
        labels = ",".join(f'{f.labels[i]}="{_escape_label(values[i])}"' for i in order)
        yield f"{name}{{{labels}}} {number(value)}\n" if labels else f"{name} {number(value)}\n"


def text(families: Iterable[Family]) -> bytes:
    """The text format 0.0.4: a counter's family is named with its ``_total``; HELP escapes ``\\``
    and newlines only; no UNIT line."""
    out: List[str] = []
    for f in families:
        name = f.name + "_total" if f.kind == "counter" else f.name
        out.append(f"# HELP {name} {_escape_help(f.help)}\n")
        out.append(f"# TYPE {name} {f.kind}\n")
        out.extend(_samples(f, name))
    return "".join(out).encode()


def openmetrics(families: Iterable[Family]) -> bytes:
    """OpenMetrics 1.0.0: HELP escaped as label values are, UNIT where the family has one, a
    counter's sample ``<family>_total``, ``# EOF`` last."""
    out: List[str] = []
    for f in families:
        out.append(f"# HELP {f.name} {_escape_label(f.help)}\n")
        out.append(f"# TYPE {f.name} {f.kind}\n")
        if f.unit:
            out.append(f"# UNIT {f.name} {f.unit}\n")
        out.extend(_samples(f, f.name + "_total" if f.kind == "counter" else f.name))
    out.append("# EOF\n")
    return "".join(out).encode()


def _version(params: Sequence[str]) -> Tuple[int, ...]:
    """The ``version=`` of a media range's parameters; () when absent, (-1,) when not numbers."""
    for p in params:
        key, _, value = p.partition("=")
        if key.strip() == "version":
            try:
                return tuple(int(n) for n in value.strip().split("."))
            except ValueError:
                return (-1,)
    return ()


def negotiate(accept: str) -> Tuple[Callable[[Iterable[Family]], bytes], str]:
    """The writer and Content-Type for an ``Accept`` header, as prometheus_client's ``choose_encoder``
    chose: OpenMetrics 1.0.0 when a range asks ``application/openmetrics-text`` with no version or
    one >= 1.0.0 (q-values are not weighed), else the text format 0.0.4."""
    for media_range in accept.split(","):
        media_type, *params = media_range.split(";")
        if media_type.strip().lower() == "application/openmetrics-text":
            version = _version(params)
            if not version or version >= (1, 0, 0):
                return openmetrics, OPENMETRICS
    return text, TEXT
