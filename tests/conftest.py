"""Shared pytest setup.

`netns` tests need root and network namespaces. In CI (CI=true) they always run - a missing
privilege must fail there, not hide as a skip. Elsewhere they are skipped only when not root.
"""

from __future__ import annotations

import os

import pytest



def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 or _in_ci():
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (always runs when CI=true)")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)
