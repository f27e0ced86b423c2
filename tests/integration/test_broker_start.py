"""A start that fails after it has begun writing (the first namespace's store is open, the second fails)
leaves nothing new on disk: the data directory it made, and the parents it made for it, are removed."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from local_broker.server import BrokerServer


def test_a_start_that_fails_midway_removes_the_data_directory_it_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "new" / "data"
    server = BrokerServer({"namespaces": {"first": {"queues": {"q": {}}}, "second": {}}}, data_dir=str(data))
    host = BrokerServer._host

    def second_fails(self: BrokerServer, spec, *args) -> None:
        if spec.name == "second":
            assert (data / "first.db").exists()  # the first namespace's store is open by now
            raise OSError(errno.EIO, "the second namespace failed (injected)")
        host(self, spec, *args)

    monkeypatch.setattr(BrokerServer, "_host", second_fails)
    with pytest.raises(OSError, match="injected"):
        server.start()
    assert not (tmp_path / "new").exists()
    server.stop()  # what a caller does after a failed start: nothing left to stop
