"""judge_models_answer: what a /v1/models answer says about the target (issue #11 item 14)."""

from __future__ import annotations

import pytest

from loadgen.run.reach import judge_models_answer

URL = "http://h:1/v1/models"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b'{"object": "list", "data": []}', None),  # an empty list is an answer (then --model)
        (404, b"Not Found", None),  # servers without a model list
        (401, b"", f"{URL} refused the request (HTTP 401): check --api-key"),
        (503, b"", f"{URL} answered HTTP 503 (empty body): the server is failing, see its log"),
        (418, b"teapot", f"{URL} answered HTTP 418 ('teapot'), which is not an OpenAI-compatible response"),
        (200, b"", f"{URL} answered an empty body, which is not an OpenAI-compatible response"),
        (200, b'{"data": {}}', f"{URL} answered '{{\"data\": {{}}}}' (no 'data' list of models), which"),
        (200, b"x" * 100, f"{URL} answered '{'x' * 57}...', which"),
    ],
)
def test_item14_models_answer_is_judged_by_what_was_seen(
    status: int, body: bytes, message: str | None
) -> None:
    problem = judge_models_answer(URL, status, body)
    if message is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(message)
