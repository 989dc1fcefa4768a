"""The published JSON Schema must match the model it is generated from."""

from __future__ import annotations

import json

from engine.plan import default_plan
from engine.planfile import PlanFile, to_document
from engine.schema import SCHEMA_PATH, file_schema, schema_text


def test_published_schema_is_current() -> None:
    """Fails when the Plan changed but resources/schema was not regenerated
    (run ``python -m engine.schema --write``)."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()


def test_schema_describes_a_saved_file() -> None:
    """A saved document's keys are exactly the schema's properties, and every plan
    section is a property of the Plan definition."""
    schema = file_schema()
    doc = to_document(PlanFile(plan=default_plan()))
    assert set(doc) <= set(schema["properties"])
    assert set(doc["plan"]) == set(schema["$defs"]["Plan"]["properties"])


def test_default_plan_validates_against_schema() -> None:
    jsonschema = __import__("pytest").importorskip("jsonschema")
    doc = json.loads(json.dumps(to_document(PlanFile(plan=default_plan()))))
    jsonschema.validate(doc, file_schema())
