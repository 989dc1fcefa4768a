"""The JSON Schema of a .memplan file, generated from the Plan model.

Published at ``resources/schema/memplan.schema.json`` so other tools can validate
plans; a test fails when the published copy is stale. Regenerate with
``python -m engine.schema --write``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from engine.plan import Plan
from engine.planfile import FORMAT_NAME, SCHEMA_VERSION

SCHEMA_PATH = (
    Path(__file__).resolve().parent.parent / "resources" / "schema" / ("memplan.schema.json")
)


def file_schema() -> dict[str, Any]:
    """The schema of the whole file: metadata around the Plan's own schema."""
    plan_schema = Plan.model_json_schema(mode="validation")
    defs = plan_schema.pop("$defs", {})
    defs["Plan"] = plan_schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://memplan.invalid/schema/memplan-{SCHEMA_VERSION}.json",
        "title": "MemPlan plan file",
        "type": "object",
        "required": ["format", "schema_version", "plan"],
        "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT_NAME},
            "schema_version": {"const": SCHEMA_VERSION},
            "app_version": {"type": "string"},
            "formula_version": {"type": "integer", "minimum": 1},
            "created": {"type": "string"},
            "modified": {"type": "string"},
            "name": {"type": "string"},
            "notes": {"type": "string"},
            "config_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "plan": {"$ref": "#/$defs/Plan"},
            "measurements": {"type": "array", "items": {"type": "object"}},
        },
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(file_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        SCHEMA_PATH.write_text(schema_text(), encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
        return 0
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
