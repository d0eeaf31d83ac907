"""The pqs-oqs groups as the registry lists them, and the server every test here shares."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "testbed"))

from pqshake.registry import load_registry  # noqa: E402

REGISTRY = load_registry()
OQS_GROUPS = [g.name for g in REGISTRY.groups.values() if g.provider == "oqs"]
NATIVE_INTEROP = ["X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
                  "MLKEM512", "MLKEM768", "MLKEM1024"]
# decoys for hrr mode come after every measured group in the server's strict preference
DECOYS = ["x25519", "secp256r1", "x448", "secp384r1"]
# One server per family: OpenSSL 3.5's server-side group selection (check_overlap in
# tls_parse_ctos_key_share) read out of bounds with long server group lists (an ASan SEGV
# with ~48+ groups configured; see testbed/oqsprov/README.md; fixed in 3.6.3), so no server
# here gets more than a family's groups (<= 16) plus the decoys.
FAMILIES = {}
for _g in REGISTRY.groups.values():
    if _g.provider == "oqs":
        FAMILIES.setdefault(_g.family, []).append(_g.name)
FAMILY_OF = {g: f for f, gs in FAMILIES.items() for g in gs}


def server_groups(family):
    return ":".join(FAMILIES[family] + DECOYS)
NATIVE_ENV = {"PQS_OQS_NATIVE": "1"}
