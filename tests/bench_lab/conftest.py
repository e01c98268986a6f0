"""The bench's own lab tests: what the bench builds beside remirror, checked on the hosts' lab
before `./dev bench` measures with it (not a CI tier: they test the bench, not the product).

The hosts' lab's fixtures and its refusal to start without the image, as tests/hosts_lab has them.
"""

from tests.hosts_lab.conftest import pytest_configure, work  # noqa: F401 - pytest's hook and fixture
from tests.live_report import pytest_runtest_logreport  # noqa: F401 - a pytest hook
