"""pytest wiring for tests/testbed; the helpers live in testbed_helpers.py."""
import pytest

from testbed_helpers import Server


@pytest.fixture
def server_factory(tmp_path):
    started = []

    def make(*args, **kw):
        srv = Server(tmp_path, *args, **kw)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()
