"""The studio against its own OpenAPI document, with schemathesis (the tool made for it): every
route the document lists, requests generated from the document, and every answer checked against
it: no 5xx, the declared status codes, content types and answer schemas, requests the document
forbids refused; then the server still answers."""

import pytest
from hypothesis import HealthCheck, settings
from starlette.testclient import TestClient

from attnkit.server.app import create_app

schemathesis = pytest.importorskip("schemathesis")

pytestmark = pytest.mark.slow  # the trained toy models and a few hundred requests

# what a request that fits the document may still be refused for, since the rule depends on the
# input itself: a query position past the sentence, a held record's id (the server keeps the
# latest), a layer or head the model does not have, an answer of more than one token
DEPENDS_ON_INPUT = {
    "/api/explain",
    "/api/overview",
    "/api/tile",
    "/api/top",
    "/api/heads",
    "/api/atlas",
    "/api/circuits",
    "/api/qk",
}


LOCAL = {"Host": "127.0.0.1:8000"}  # the studio answers its own machine's names (server/guard.py)


@pytest.fixture(scope="module")
def served_app(studio):
    return create_app(studio)


def _checks(path: str) -> list:
    from schemathesis.checks import (
        content_type_conformance,
        negative_data_rejection,
        not_a_server_error,
        positive_data_acceptance,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
              negative_data_rejection]  # fmt: skip
    return checks if path in DEPENDS_ON_INPUT else [*checks, positive_data_acceptance]


def test_every_route_keeps_the_contract(served_app):
    from hypothesis import given

    api = schemathesis.openapi.from_asgi("/api/openapi.json", served_app, headers=LOCAL)
    operations = [result.ok() for result in api.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/translate", "/api/explain", "/api/attribute", "/api/atlas"}
    for op in operations:
        checks = _checks(op.path)

        @given(case=op.as_strategy())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def keeps(case):
            case.call_and_validate(checks=checks, headers=LOCAL)  # noqa: B023  (run before the loop moves on)

        keeps()


def test_the_server_still_answers_after_the_contract_run(served_app, names):
    with TestClient(served_app, base_url="http://127.0.0.1") as client:
        r = client.post("/api/translate", json={"model": names["transformer"], "text": "a b c"})
        assert r.status_code == 200 and r.json()["translation"]
