"""The package's public surface: every name in ``__all__`` resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import daskprofile


def test_all_lists_exactly_the_lazy_exports() -> None:
    exported = set(daskprofile._EXPORTS) | {"__version__"}
    assert set(daskprofile.__all__) == exported
    for name in daskprofile.__all__:
        assert getattr(daskprofile, name) is not None


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        daskprofile.no_such_thing


def test_import_is_cheap() -> None:
    code = (
        "import sys, daskprofile; "
        "print(','.join(m for m in ('bokeh', 'ipywidgets', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
