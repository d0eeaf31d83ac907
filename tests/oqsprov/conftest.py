"""pytest wiring for tests/oqsprov: reuses tests/testbed/testbed_helpers.py (server, timer)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testbed"))
