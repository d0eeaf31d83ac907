"""Settings a careless user gives (issue 45, items 1 and 7), as a table: an experiment's extra
keys, the one line expected (a regular expression of the first line) and the exit status. A
setting that changes nothing in the run, or a label no cell would measure, is refused; the
spellings YAML 1.1 turns into booleans are taken."""

from __future__ import annotations


import pytest

BASE = {"name": "h", "groups": ["x25519"], "sigs": ["ml-dsa-44"], "profiles": ["lan"], "samples": 3}
REFUSED = r"^pqshake: \S+:\d+ "

# (extra keys, first line, exit status)
CASES = [
    # RFC 8879 is TLS 1.3 only: a TLS 1.2 cell labelled compressed would send its chain whole
    ({"modes": ["tls12"], "sigs": ["ecdsa-p256"], "cert_compression": "brotli"},
     REFUSED + r"cert_compression: brotli: mode tls12 cannot compress certificates \(RFC 8879 is TLS 1\.3 only\).*"
     r"exclude rule \{mode: tls12, cert_compression: brotli\}", 2),
    ({"modes": ["full", "tls12"], "sigs": ["ecdsa-p256"], "cert_compression": ["off", "brotli"]},
     REFUSED + r"cert_compression: brotli: mode tls12 cannot compress", 2),
    # ... and the exclude rule it names takes the TLS 1.2 cell out
    ({"modes": ["full", "tls12"], "sigs": ["ecdsa-p256"], "cert_compression": ["off", "brotli"],
      "exclude": [{"mode": "tls12", "cert_compression": "brotli"}]}, r"^h: 3 cells ", 0),
    # a chain's depth where no handshake sends a chain
    ({"modes": ["resume"], "chain_depth": 2},
     REFUSED + r"chain_depth: settings of the server's certificate chain, but no cell's handshake sends it", 2),
    ({"modes": ["full", "resume"], "chain_depth": 2}, r"^h: 2 cells ", 0),
    # the client chain's intermediates at client_chain_depth 1: there are none (its root, which
    # signs the leaf, matters at any depth)
    ({"client_auth": "ml-dsa-44", "client_inter_sig": "ecdsa-p256"},
     REFUSED + r"client_inter_sig: the client chain's intermediates under mutual TLS, but no cell's client chain "
     r"has one", 2),
    ({"client_auth": "ml-dsa-44", "client_root_sig": "ecdsa-p256"}, r"^h: 1 cells? ", 0),
    # swept together: the intermediates' values at depth 2 only (1 + 2 cells)
    ({"client_auth": "ml-dsa-44", "client_chain_depth": [1, 2], "client_inter_sig": ["ecdsa-p256", "ml-dsa-44"]},
     r"^h: 3 cells ", 0),
    # a response where no cell's transport carries one (a sweep of it changed nothing)
    ({"transports": ["quic"], "response_bytes": [0, 1000]},
     REFUSED + r"response_bytes: the response after the handshake, but no cell's transport carries one", 2),
    ({"transports": ["tcp", "quic"], "response_bytes": [0, 1000]}, r"^h: 3 cells ", 0),
    # YAML 1.1 reads on/off, true/false, yes/no as booleans: taken as on/off, also in a list
    ({"modes": ["0rtt"], "early_response": True}, r"^h: 1 cells? ", 0),
    ({"modes": ["0rtt"], "early_response": [True, False]}, r"^h: 2 cells ", 0),
    ({"modes": ["0rtt"], "early_response": "maybe"}, REFUSED + r"early_response: 'maybe': Input should be 'on' or 'off'", 2),
    ({"transports": ["quic"], "quic_retry": [False, True]}, r"^h: 2 cells ", 0),
]


@pytest.mark.parametrize("extra,expect,code", CASES, ids=[str(c[0])[:90] for c in CASES])
def test_setting(plan_case, extra, expect, code):
    plan_case(BASE, extra, expect, code)


def test_yaml_on_off_spellings(tmp_path, capsys):
    """The bare words themselves, as a user types them (yaml.safe_dump above writes true/false)."""
    from pqshake import cli

    f = tmp_path / "e.yaml"
    f.write_text("name: h\ngroups: [x25519]\nsigs: [ml-dsa-44]\nprofiles: [lan]\nsamples: 3\nmodes: [0rtt]\n"
                 "early_response: [on, off]\n")
    assert cli.main(["plan", "--seed", "1", "--cells", str(f)]) == 0
    out = capsys.readouterr().out
    assert "early_response: on, off" in out and "__early-off__" in out and "__early-on__" in out, out
