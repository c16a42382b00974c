"""The simulated model: an OpenAI-compatible server whose personas have known bias.

It is a calibration instrument, not a language model: given the suite's cases it answers each
prompt as a persona would (:mod:`.personas`), optionally failing on purpose (:mod:`.faults`), so
a benchmark run against it has exactly computable expected metrics.
"""

from biascheck.sim.knowledge import SimKnowledge, message_key
from biascheck.sim.personas import (
    PERSONA_NAMES,
    Persona,
    choose_answer,
    expected_answer_distribution,
    parse_persona,
    render_reply,
)
from biascheck.sim.process import SimProcess, spawn_sim_server
from biascheck.sim.server import SimApp, SimServer
from biascheck.sim.stories import expected_pair_distribution, judge_answer, write_continuation

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
