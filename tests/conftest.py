"""The suite's order: the tests that compile the fused loop's kernels first.

With a cold Numba cache most of the suite's time is test_reference.py compiling kernels, a few of its
tests for a minute or two each. pytest-xdist hands tests to its workers in collection order, so a long
one collected late leaves one worker running it alone at the end (the suite measured 8:41 and 9:54 on
2 cores with it in its alphabetical place); run first, the short tests after it even the workers out.
"""

from __future__ import annotations

import pytest

FIRST = ("test_reference.py",)
"""The files whose tests run first, in their own order."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the order within each part is kept
