"""The simulated model: an OpenAI-compatible server whose personas have known bias.

It is a calibration instrument, not a language model: given the suite's cases it answers each
prompt as a persona would (:mod:`.personas`), optionally failing on purpose (:mod:`.faults`), so
a benchmark run against it has exactly computable expected metrics.
"""

from __future__ import annotations

from biascheck.core.lazy import lazy_exports

__all__ = [
    "PERSONA_NAMES",
    "Persona",
    "SimApp",
    "SimKnowledge",
    "SimProcess",
    "SimServer",
    "choose_answer",
    "expected_answer_distribution",
    "expected_pair_distribution",
    "judge_answer",
    "message_key",
    "parse_persona",
    "render_reply",
    "spawn_sim_server",
    "write_continuation",
]

# Where each name lives, imported on first use: ``biascheck.sim.provider`` checks a sim/ model
# string at start-up through ``biascheck.sim.personas``, which must not load the server, the
# knowledge (every benchmark's loaders) and the stories with it.
_HOMES = {
    "SimKnowledge": "knowledge",
    "message_key": "messages",
    "PERSONA_NAMES": "personas",
    "Persona": "personas",
    "choose_answer": "personas",
    "expected_answer_distribution": "personas",
    "parse_persona": "personas",
    "render_reply": "personas",
    "SimProcess": "process",
    "spawn_sim_server": "process",
    "SimApp": "server",
    "SimServer": "server",
    "expected_pair_distribution": "stories",
    "judge_answer": "stories",
    "write_continuation": "stories",
}
__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()}, __all__)
