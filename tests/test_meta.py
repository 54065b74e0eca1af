"""RunMeta: typed fields, read as a mapping too, checked on load, saved with the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import daskprofile
from daskprofile.meta import RunMeta
from daskprofile.run import Run


def test_fields_are_typed_attributes_and_mapping_keys() -> None:
    meta = RunMeta(id="r1", t0=2.0, schedulers=["threads"])
    assert meta.id == meta["id"] == "r1"
    assert meta.get("t1") is None
    meta["computes"] = 3
    assert meta.computes == 3
    assert "distributed" not in meta  # absent until a cluster ran
    meta.distributed = {"scheduler": "tcp://x:1"}
    assert "distributed" in meta
    assert dict(meta)["schedulers"] == ["threads"]


def test_a_field_of_the_wrong_type_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'computes'"):
        RunMeta.from_dict({"computes": "three"})
    with pytest.raises(ValueError, match="'finished'"):
        Run({"finished": 1})
    meta = RunMeta()
    with pytest.raises(ValueError, match="'t1'"):
        meta["t1"] = "later"
    with pytest.raises(KeyError):
        del meta["id"]


def test_unknown_keys_are_kept_and_saved(tmp_path: Path) -> None:
    run = Run({"id": "r2", "note": {"by": "user"}, "t0": 1.5})
    assert run.meta["note"] == {"by": "user"}
    again = daskprofile.load(run.save(tmp_path / "r.npz"))
    assert again.meta["note"] == {"by": "user"}
    assert again.meta.t0 == 1.5
    assert Run.from_dict(run.to_dict()).meta.extra == {"note": {"by": "user"}}


def test_a_file_with_bad_metadata_is_a_value_error(tmp_path: Path) -> None:
    path = Run({"id": "r3"}).save(tmp_path / "r.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    head = json.loads(arrays["__json__"].tobytes())
    head["meta"]["pid"] = "not a pid"
    arrays["__json__"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="'pid'"):
        daskprofile.load(tmp_path / "bad.npz")


def test_a_recorded_run_has_typed_metadata() -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        pass
    assert isinstance(run.meta, RunMeta)
    assert run.meta.finished is True
    assert run.meta.t1 is not None
    assert run.meta.t1 >= run.meta.t0
    assert run.meta.id
    assert run.meta.host
    assert run.meta.pid


def test_reduced_parts_are_a_typed_field_saved_with_the_run(tmp_path: Path) -> None:
    assert RunMeta().reduced == {}
    why = {"stacks": "workers lack daskprofile (ModuleNotFoundError: ...): no stack samples"}
    run = Run({"id": "r4", "reduced": why})
    assert run.meta.reduced == run.meta["reduced"] == why
    assert "reduced" not in run.meta.extra
    again = daskprofile.load(run.save(tmp_path / "r.npz"))
    assert again.meta.reduced == why
    assert Run.from_dict(run.to_dict()).meta.reduced == why
    with pytest.raises(ValueError, match="'reduced'"):
        RunMeta.from_dict({"reduced": ["stacks"]})
    with pytest.raises(ValueError, match="'reduced'"):
        RunMeta.from_dict({"reduced": {"stacks": 3}})
    with pytest.raises(ValueError, match="'reduced'"):
        run.meta["reduced"] = {1: "x"}
    old = Run({"id": "r5"}).to_dict()  # a file of before the field: nothing reduced
    del old["meta"]["reduced"]
    assert Run.from_dict(old).meta.reduced == {}


def test_a_run_says_what_ran_it_and_keeps_it(tmp_path: Path) -> None:
    import platform

    import dask

    with daskprofile.profile(resources=False, stacks=False) as run:
        dask.compute(dask.delayed(sum)([1, 2]))
    versions = run.meta.versions
    assert versions["python"] == platform.python_version()
    assert versions["dask"] == dask.__version__
    assert versions["daskprofile"] == daskprofile.__version__
    assert daskprofile.load(run.save(tmp_path / "v.npz")).meta.versions == versions
    with pytest.raises(ValueError, match="'versions'"):
        RunMeta.from_dict({"versions": {"dask": 2026}})
