"""The local stack's KRaft cluster id, without starting anything."""
import base64
import uuid

import pytest

import stack.probes
from stack.probes import kraft_cluster_id


def test_a_cluster_id_that_would_read_as_an_option_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    dash, plain = uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x10" + bytes(15))
    draws = iter([dash, plain])
    monkeypatch.setattr(stack.probes.uuid, "uuid4", lambda: next(draws))
    assert base64.urlsafe_b64encode(dash.bytes).startswith(b"-")   # what the storage tool refused
    cluster_id = kraft_cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22
    assert base64.urlsafe_b64decode(cluster_id + "==") == plain.bytes
