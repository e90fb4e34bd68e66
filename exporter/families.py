"""Building Prometheus metric families with exact names (dcgm-exporter's upper-case names included)."""

from __future__ import annotations

from prometheus_client.core import Metric


class Families:
    """Ordered set of metric families; `add()` creates a family on first use."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, typ: str, documentation: str, labels: dict[str, str], value: float) -> None:
        """Add one sample; `typ` is gauge, counter (name must end in _total) or untyped."""
        family = self._families.get(name)
        if family is None:
            family = Metric(name, documentation, typ)
            self._families[name] = family
        sample_name = name if typ != "counter" else family.name + "_total"
        family.add_sample(sample_name, labels, float(value))

    def metrics(self) -> list[Metric]:
        """All families, in the order first added."""
        return list(self._families.values())
