"""The `fake` adapter: answers a scripted outcome without running anything (the demo
and the tests). The answer is the definition's `fake:` script, or, for definitions
without one (agent work in the demo), a script given to the adapter by definition ref.
An event whose payload carries `fake: {outcome, result?}` overrides both; only test and
demo registries, whose schemas allow that key, can send one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.core.registry import Definition, FakeScript
from engine.service.runs import Execution

if TYPE_CHECKING:
    from engine.adapters import Job

ANSWER_FILE = "fake.json"


def payload_override(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The payload's `fake` answer, when it names an outcome."""
    fake = payload.get("fake")
    if not isinstance(fake, Mapping) or not isinstance(fake.get("outcome"), str):
        return None
    extra = fake.get("result")
    return {**(extra if isinstance(extra, Mapping) else {}), "outcome": fake["outcome"]}


def scripted(script: FakeScript) -> dict[str, Any]:
    return {**script.result, "outcome": script.outcome}


def answer(
    definition: Definition, payload: Mapping[str, Any], scripts: Mapping[str, FakeScript]
) -> dict[str, Any] | None:
    """The result document to report; None when nothing scripts this definition."""
    override = payload_override(payload)
    if override is not None:
        return override
    script = definition.fake or scripts.get(definition.ref)
    return None if script is None else scripted(script)


class FakeAdapter:
    """`scripts` answers definitions that have no `fake:` script, by ref (`id@version`)."""

    def __init__(self, scripts: Mapping[str, FakeScript] | None = None) -> None:
        self.scripts = dict(scripts or {})

    async def execute(self, job: Job) -> Execution:
        result = answer(job.definition, job.event.payload, self.scripts)
        if result is None:
            return Execution(result=None, error=f"no fake script for {job.definition.ref}")
        path = job.run_dir / ANSWER_FILE
        note = {"definition": job.definition.ref, "answered": result}
        path.write_text(json.dumps(note, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return Execution(result=result, artifact=str(path))
