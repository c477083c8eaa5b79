"""The recorder's results as a SARIF 2.1.0 log (one run, the rules it used)."""

from __future__ import annotations

import json
import os
from typing import Any

from onnxport.diagnostics.recorder import RULES, Recorder

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif_log(recorder: Recorder, *, tool_version: str = "") -> dict[str, Any]:
    used = list(dict.fromkeys(r.rule_id for r in recorder.results))
    index = {rule_id: i for i, rule_id in enumerate(used)}
    driver: dict[str, Any] = {
        "name": "onnxport",
        "informationUri": "https://github.com/onnxport/onnxport",
        "rules": [{
            "id": rule_id,
            "name": RULES[rule_id].name,
            "shortDescription": {"text": RULES[rule_id].description},
            "defaultConfiguration": {"level": RULES[rule_id].level},
        } for rule_id in used],
    }
    if tool_version:
        driver["version"] = tool_version
    results = []
    for r in recorder.results:
        result: dict[str, Any] = {"ruleId": r.rule_id, "ruleIndex": index[r.rule_id],
                                  "level": r.level, "message": {"text": r.message}}
        if r.file is not None:
            physical: dict[str, Any] = {"artifactLocation": {"uri": r.file}}
            if r.line:
                physical["region"] = {"startLine": r.line}
            location: dict[str, Any] = {"physicalLocation": physical}
            if r.function:
                location["logicalLocations"] = [{"name": r.function, "kind": "function"}]
            result["locations"] = [location]
        if r.properties:
            result["properties"] = {k: _json_value(v) for k, v in r.properties.items()}
        results.append(result)
    run: dict[str, Any] = {"tool": {"driver": driver}, "results": results}
    if recorder.stage_seconds:
        run["properties"] = {"stageSeconds": dict(recorder.stage_seconds)}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def write_sarif(recorder: Recorder, path: str | os.PathLike, *, tool_version: str = "") -> None:
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(sarif_log(recorder, tool_version=tool_version), stream, indent=2)
        stream.write("\n")


def _json_value(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)
