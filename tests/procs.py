"""Stopping a process a test started, by its Popen (never by name or pattern): SIGTERM, a wait,
then SIGKILL if it did not exit."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen, timeout: float = 10) -> int:
    """The process's exit code after SIGTERM (SIGKILL after `timeout` seconds); a process that
    already exited is only reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
