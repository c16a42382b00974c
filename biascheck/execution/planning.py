"""A stage's requests of one model, keyed for the store: what the session plans for the model under
test and the judge stage plans for each judge."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from biascheck.execution.llm import ModelConfig
from biascheck.execution.runner import ModelRequest
from biascheck.execution.store import key_prefix, sample_key

Planned = TypeVar("Planned")  # what ``requests_of`` reads per unit: a case, or for a judge a case with its generations
# The requests one unit needs, as (messages, parameters, sample index).
RequestsOf = Callable[..., Iterable[tuple[list[dict], dict, int]]]


def plan_requests(requests_of: RequestsOf, units: Sequence[Planned], model: ModelConfig, *args: Any) -> tuple[list[list[str]], list[ModelRequest]]:
    """The request keys of each unit, in order, and the requests to execute (repeats included:
    ``execute`` makes each distinct key once). ``requests_of(unit, *args)`` gives a unit's requests."""
    keys: list[list[str]] = []
    requests: list[ModelRequest] = []
    for unit in units:
        unit_keys = []
        # A unit's k samples are the same messages and parameters: their key material is written once.
        # (The objects are kept with it, so that no other object can take their ids meanwhile.)
        prefixes: dict[tuple[int, int], tuple[object, object, str]] = {}
        for messages, request_params, sample in requests_of(unit, *args):
            known = prefixes.get((id(messages), id(request_params)))
            if known is None:
                prefix = key_prefix(model.model, model.endpoint, messages, request_params, model.revision)
                prefixes[id(messages), id(request_params)] = (messages, request_params, prefix)
            else:
                prefix = known[2]
            key = sample_key(prefix, sample)
            unit_keys.append(key)
            requests.append(ModelRequest(key, messages, request_params, sample))
        keys.append(unit_keys)
    return keys, requests
