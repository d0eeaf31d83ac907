"""Mininet's Python API from the Debian package (`apt-get install mininet`), for the venv.

Debian installs Mininet for the system python under /usr/lib/python3/dist-packages. Only the
`mininet` package itself is loaded from there (by its exact path, not by putting the whole
dist-packages directory on sys.path), and only when an experiment says `engine: mininet`.
It is never pip-installed; Mininet's broad cleanup (`mn -c`, mininet.clean) is never called.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import warnings
from pathlib import Path

from pqshake.errors import UserError

DIST = Path(os.environ.get("PQS_MININET_DIST", "/usr/lib/python3/dist-packages"))
INSTALL_HINT = "engine: mininet needs Debian's mininet package: apt-get install mininet (make system installs it)"


def _load():
    if "mininet" in sys.modules:
        return sys.modules["mininet"]
    init = DIST / "mininet" / "__init__.py"
    if not init.is_file():
        raise UserError(f"{INSTALL_HINT} ({init} not found)", exit_code=1)
    spec = importlib.util.spec_from_file_location("mininet", init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mininet"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:
        del sys.modules["mininet"]
        raise
    return mod


def import_mininet():
    """(net, node, link, log) modules of the Debian Mininet; UserError with the install command
    when it is missing (or mnexec is)."""
    _load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # node.py imports distutils.version
        from mininet import link, log, net, node  # type: ignore[import-not-found]
    if shutil.which("mnexec") is None:
        raise UserError(f"{INSTALL_HINT} (mnexec not found on PATH)", exit_code=1)
    log.setLogLevel(os.environ.get("PQS_MININET_LOG", "error"))
    return net, node, link, log


def available() -> tuple[bool, str]:
    """(usable, detail) without raising: for `pqshake doctor`."""
    try:
        net, _, _, _ = import_mininet()
    except UserError as e:
        return False, str(e).split(" (", 1)[-1].rstrip(")") if "(" in str(e) else str(e)
    except Exception as e:  # noqa: BLE001
        return False, f"the Debian mininet package does not import: {type(e).__name__}: {e}"
    return True, f"Mininet {getattr(net, 'VERSION', '?')} (Debian package, {DIST / 'mininet'})"
