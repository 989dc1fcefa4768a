"""Generate the measurement probe a user drops into a training script.

The template lives in ``resources/probe/memplan_probe.py`` as a real, runnable module
(its tests import it), so what users get is exactly what was tested. Generating it only
replaces three marked constant lines with the plan's config hash, workload hash and
name — a record then
names the plan it measures, and ``memplan validate-run`` can warn when it does not match.
"""

from __future__ import annotations

from importlib import resources

TEMPLATE_PACKAGE = "resources.probe"
TEMPLATE_NAME = "memplan_probe.py"
HASH_MARKER = "PLAN_CONFIG_HASH = None  # memplan:config_hash"
WORKLOAD_MARKER = "PLAN_WORKLOAD_HASH = None  # memplan:workload_hash"
NAME_MARKER = "PLAN_NAME = None  # memplan:plan_name"


def template_text() -> str:
    """The unfilled probe module, as shipped."""
    return resources.files(TEMPLATE_PACKAGE).joinpath(TEMPLATE_NAME).read_text(encoding="utf-8")


def probe_source(config_hash: str, workload_hash: str, plan_name: str = "") -> str:
    """The probe module with the plan's two hashes and its name baked in.

    Values are written with ``repr`` so any name is a valid Python string literal.
    Raises ``RuntimeError`` if the template lost its markers (a packaging defect).
    """
    text = template_text()
    for marker in (HASH_MARKER, WORKLOAD_MARKER, NAME_MARKER):
        if text.count(marker) != 1:
            raise RuntimeError(f"probe template: expected one line {marker!r}")
    text = text.replace(HASH_MARKER, f"PLAN_CONFIG_HASH = {config_hash!r}  # memplan:config_hash")
    text = text.replace(
        WORKLOAD_MARKER, f"PLAN_WORKLOAD_HASH = {workload_hash!r}  # memplan:workload_hash"
    )
    return text.replace(NAME_MARKER, f"PLAN_NAME = {plan_name!r}  # memplan:plan_name")
