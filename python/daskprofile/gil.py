"""Python's switch interval, lowered by whoever needs the GIL handed over promptly.

A thread that wants the GIL from a busy pure-Python thread waits up to
``sys.getswitchinterval()`` (5 ms by default) each time it asks, and a thread that gives it
up often (locks, I/O, numpy loops) asks many times. The stack sampler and the comm
publisher lower the interval for as long as they need it; the last one restores it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["SwitchInterval", "lowered", "switch"]


class SwitchInterval:
    """Reference-counted lowering of ``sys.setswitchinterval`` (restored by the last user)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0
        self._set = 0.0

    def lower(self, value: float) -> None:
        """Lower the interval to ``value`` (if it is lower); pair with :meth:`restore`."""
        with self._lock:
            if self._users == 0:
                self._saved = sys.getswitchinterval()
            self._users += 1
            if value < sys.getswitchinterval():
                sys.setswitchinterval(value)
            self._set = sys.getswitchinterval()

    def restore(self) -> None:
        """Undo one :meth:`lower`; the last one puts the saved value back."""
        with self._lock:
            self._users = max(0, self._users - 1)
            # leave a value someone else set meanwhile alone
            if self._users == 0 and sys.getswitchinterval() == self._set:
                sys.setswitchinterval(self._saved)


#: the process's one switch-interval keeper
switch = SwitchInterval()


@contextlib.contextmanager
def lowered(value: float) -> Iterator[None]:
    """Run a block with the switch interval at most ``value`` seconds."""
    switch.lower(value)
    try:
        yield
    finally:
        switch.restore()
