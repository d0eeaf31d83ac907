"""pqshake: measure post-quantum TLS 1.3 handshakes over emulated networks."""

__version__ = "0.1.0"
