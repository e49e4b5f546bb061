"""HDF5 layouts: read and write PDEBench (Burgers, 2D fields), LPSDA (KS) and amg_fast's own.

PDEBench  `tensor` float32 [N, T, X], `x-coordinate` [X] (cell centres), `t-coordinate` [T + 1]
          (PDEBench saves one time more than there are frames; the first T are the frames),
          root attribute `Nu` (the file's nu; the PDE's viscosity is Nu / pi). A downloaded file
          without `Nu` gets it from its name (`..._Nu0.001.hdf5`).
          2D: `tensor` [N, T, X, Y] plus `y-coordinate` [Y] (a scalar field, as PDEBench's 2D
          Darcy and diffusion-reaction files name it; our 2D Navier-Stokes vorticity), or
          PDEBench's 2D CFD layout: one [N, T, X, Y] dataset per field (`density`, `pressure`,
          `Vx`, `Vy`) with the same coordinates, read one field at a time (field=). PDEBench's
          incompressible-NS files (`velocity`, `particles`, `force`, no coordinates) are refused.
LPSDA     one group per split (`train`, `valid`, `test`), each with `pde_{nt}-{nx}` [N, nt, nx],
          `x` [N, nx], `t` [N, nt], `dx` [N], `dt` [N]; group attributes `nu`, `L`, `seed`.
amg_fast  root `u` [N, T, X], `x` [X], `t` [T], attribute `format = "amg_fast"`.
Root attributes of any layout are passed through (the generators store `omega_f_{f}` there).
Writers go through a temporary file renamed at the end: an interrupted write leaves no file
that looks complete.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from amg_fast._checks import ArgumentError
from amg_fast._files import atomic_path

__all__ = ["Trajectories", "DataFileError", "FieldError", "read_trajectories", "locate", "atomic_h5", "write_pdebench",
           "write_lpsda", "write_amg_fast", "LAYOUTS", "Location", "open_file", "check_finite", "CFD_FIELDS",
           "cfd_fields"]

LAYOUTS = ("pdebench", "lpsda", "amg_fast")


class DataFileError(ValueError):
    """A data file that is missing, unreadable or malformed; the message names the file."""


class FieldError(DataFileError, ArgumentError):
    """The `field` asked of a file that does not hold it (or holds one set of trajectories only), or
    none asked of a PDEBench CFD file with several; a CLI names its --field (ArgumentError.naming)."""


@dataclass
class Trajectories:
    """u [N, T, X] (2D: [N, T, X, Y]), x [X], t [T], attrs (PDE parameters and generator metadata),
    y [Y] for 2D data (None for 1D)."""

    u: np.ndarray
    x: np.ndarray
    t: np.ndarray
    attrs: dict = field(default_factory=dict)
    layout: str = "amg_fast"
    y: np.ndarray | None = None


@dataclass
class Location:
    """Where a split's trajectories live inside an open file, with their (validated) grids."""

    dataset: str
    x: np.ndarray
    t: np.ndarray
    attrs: dict
    layout: str
    shape: tuple
    y: np.ndarray | None = None


# -- writing ----------------------------------------------------------------------------------
@contextlib.contextmanager
def atomic_h5(path):
    """Open `path`.tmp-<pid> for writing; rename it to `path` only if the block succeeds (stale
    temp files of dead writers are removed first, amg_fast._files.atomic_path)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        yield f


def _finite(path, name: str, u: np.ndarray) -> np.ndarray:
    """u, refused with a DataFileError if it holds NaN or Inf: no writer stores non-finite
    trajectories (the float32 writers check after the cast, so values beyond float32's range count)."""
    try:
        check_finite(path, name, u)
    except DataFileError as err:
        raise DataFileError(f"refusing to write {err}") from None
    return u


def _finite_float32(path, name: str, u) -> np.ndarray:
    """u cast to the float32 the PDEBench and LPSDA writers store, refused if not finite there."""
    with np.errstate(over="ignore"):  # values beyond float32's range become Inf: refused just below
        stored = np.asarray(u).astype(np.float32, copy=False)
    return _finite(path, name, stored)


def _set_attrs(obj, attrs: dict | None) -> None:
    for key, value in (attrs or {}).items():
        obj.attrs[key] = value


def write_pdebench(path, u, x, t, *, nu_file: float | None = None, y=None, attrs: dict | None = None) -> None:
    """u [N, T, X] (stored float32), x [X] cell centres, t [T] frame times; nu_file: the `Nu`
    attribute (Burgers; None writes none). 2D: u [N, T, X, Y] and y [Y] (`y-coordinate`)."""
    stored = _finite_float32(path, "tensor", u)
    x, t = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
    if (y is None) != (stored.ndim == 3):
        raise ValueError(f"write_pdebench: u [N, T, X] goes without y, u [N, T, X, Y] needs y [Y]; got u of shape "
                         f"{stored.shape} and y {'None' if y is None else 'given'}")
    t_coordinate = np.append(t, t[-1] + (t[-1] - t[-2]) if len(t) > 1 else t[-1] + 1.0)
    with atomic_h5(path) as f:
        f.create_dataset("tensor", data=stored)
        f.create_dataset("x-coordinate", data=x)
        if y is not None:
            f.create_dataset("y-coordinate", data=np.asarray(y, dtype=np.float64))
        f.create_dataset("t-coordinate", data=t_coordinate)
        if nu_file is not None:
            f.attrs["Nu"] = float(nu_file)
        _set_attrs(f, attrs)


def write_lpsda(path, splits: dict, x, t, *, nu: float, L: float, seeds: dict, attrs: dict | None = None) -> None:
    """splits: {name: u [N, T, X]} (stored float32), x [X], t [T]; seeds: {name: int}."""
    x, t = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
    splits = {name: _finite_float32(path, name, u) for name, u in splits.items()}
    with atomic_h5(path) as f:
        for name, u in splits.items():
            n, nt, nx = u.shape
            group = f.create_group(name)
            group.create_dataset(f"pde_{nt}-{nx}", data=u)
            group.create_dataset("x", data=np.broadcast_to(x, (n, nx)))
            group.create_dataset("t", data=np.broadcast_to(t, (n, nt)))
            group.create_dataset("dx", data=np.full(n, x[1] - x[0]))
            group.create_dataset("dt", data=np.full(n, t[1] - t[0] if nt > 1 else 0.0))
            group.attrs.update({"nu": float(nu), "L": float(L), "seed": int(seeds[name])})
        _set_attrs(f, attrs)


def write_amg_fast(path, u, x, t, attrs: dict | None = None) -> None:
    """u [N, T, X] (dtype kept), x [X], t [T]."""
    u = _finite(path, "u", np.asarray(u))
    with atomic_h5(path) as f:
        f.create_dataset("u", data=u)
        f.create_dataset("x", data=np.asarray(x, dtype=np.float64))
        f.create_dataset("t", data=np.asarray(t, dtype=np.float64))
        f.attrs["format"] = "amg_fast"
        _set_attrs(f, attrs)


# -- reading ----------------------------------------------------------------------------------
def _plain(value):
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value


def _attrs(*objs) -> dict:
    out = {}
    for obj in objs:
        out.update({k: _plain(v) for k, v in obj.attrs.items()})
    return out


def _require(f, key: str, path, layout: str):
    if key not in f:
        raise DataFileError(f"{path}: missing dataset {key!r} ({layout} layout)")
    return f[key]


def _check_dtype(path, name: str, dataset) -> None:
    """Trajectories must be real numbers: float or integer, not bool, complex, strings or records."""
    dtype = dataset.dtype
    if dtype.kind not in "fiu":
        raise DataFileError(f"{path}: dataset {name!r} has dtype {dtype}; allowed: real numbers (a float or integer "
                            "dtype), as the trajectories u [N, T, X] are")


def _check_grids(path, name: str, shape, x, t, y=None) -> None:
    """shape [N, T, X] with x [X], t [T]; or, when y is given, [N, T, X, Y] with y [Y]."""
    if len(shape) != (3 if y is None else 4):
        expected = "rank 3 [N, T, X]" if y is None else "rank 4 [N, T, X, Y] (the file has a y grid)"
        raise DataFileError(f"{path}: dataset {name!r} must have {expected}, got shape {shape}")
    if x.ndim != 1 or len(x) != shape[2]:
        raise DataFileError(f"{path}: x must be 1-D with {shape[2]} entries (X of {name!r}), got shape {x.shape}")
    if y is not None and (y.ndim != 1 or len(y) != shape[3]):
        raise DataFileError(f"{path}: y must be 1-D with {shape[3]} entries (Y of {name!r}), got shape {y.shape}")
    if t.ndim != 1 or len(t) != shape[1]:
        raise DataFileError(f"{path}: t must be 1-D with {shape[1]} entries (T of {name!r}), got shape {t.shape}")
    for axis, values in (("x", x), ("t", t)) + ((("y", y),) if y is not None else ()):
        if not np.all(np.isfinite(values)):
            raise DataFileError(f"{path}: {axis} holds NaN or Inf values")
        if len(values) > 1 and not np.all(np.diff(values) > 0):
            raise DataFileError(f"{path}: {axis} must be strictly increasing, got {values[:8].tolist()}...")


def _per_trajectory_grid(path, group, key: str) -> np.ndarray:
    values = np.asarray(_require(group, key, path, "LPSDA"))
    if values.ndim == 2:
        if not np.allclose(values, values[:1]):
            raise DataFileError(f"{path}: {group.name}/{key} differs between trajectories; one grid per file is supported")
        values = values[0]
    return values


def _nu_from_name(path) -> dict:
    match = re.search(r"_Nu([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)", Path(path).name)
    return {"Nu": float(match.group(1))} if match else {}


CFD_FIELDS = ("density", "pressure", "Vx", "Vy", "Vz")  # PDEBench's CFD files: one dataset per field


def _pdebench_location(f: h5py.File, path, name: str) -> Location:
    """Dataset `name` [N, T, X] or [N, T, X, Y] (with `y-coordinate`) and its PDEBench coordinates."""
    shape = f[name].shape
    t = np.asarray(_require(f, "t-coordinate", path, "PDEBench"), dtype=np.float64)
    x = np.asarray(_require(f, "x-coordinate", path, "PDEBench"), dtype=np.float64)
    y = np.asarray(f["y-coordinate"], dtype=np.float64) if "y-coordinate" in f else None
    if y is None and len(shape) == 4:
        raise DataFileError(f"{path}: dataset {name!r} of shape {shape} is 2D [N, T, X, Y] but the file has no "
                            "'y-coordinate' (PDEBench)")
    if len(shape) >= 3 and t.ndim == 1 and len(t) == shape[1] + 1:
        t = t[:-1]  # PDEBench stores one time more than there are frames
    _check_grids(path, name, shape, x, t, y)
    _check_dtype(path, name, f[name])
    return Location(name, x, t, {**_nu_from_name(path), **_attrs(f)}, "pdebench", shape, y)


def _fields_of(f: h5py.File) -> list[str]:
    """The PDEBench CFD fields of an open file, in CFD_FIELDS order (none for the other layouts)."""
    return [] if "tensor" in f or "x-coordinate" not in f else [name for name in CFD_FIELDS if name in f]


def cfd_fields(path) -> list[str]:
    """The fields a PDEBench CFD file holds (`density`, `pressure`, `Vx`, ...); [] for the other layouts."""
    with open_file(path) as f:
        return _fields_of(f)


def _pdebench_field(f: h5py.File, path, field: str | None) -> str:
    """The dataset to read: `tensor`, or the CFD field asked for (the only one, if just one is there)."""
    if "tensor" in f:
        if field not in (None, "tensor"):
            raise FieldError(f"{path}: holds one field ('tensor'); field {field!r} applies to PDEBench CFD files "
                             "with several fields: drop it", "field")
        return "tensor"
    present = _fields_of(f)
    if field is None and len(present) == 1:
        return present[0]
    if field is None:
        raise FieldError(f"{path}: a PDEBench CFD file with the fields {', '.join(present)}: name one of them with "
                         "field", "field")
    if field not in present:
        raise FieldError(f"{path}: a PDEBench CFD file with the fields {', '.join(present)}: field {field!r} is not "
                         "one of them", "field")
    return field


def locate(f: h5py.File, path, split: str | None = None, field: str | None = None) -> Location:
    """Find the trajectories of `split` (LPSDA) or `field` (PDEBench CFD) in an open file; validate
    grids (not values)."""
    if "tensor" in f or _fields_of(f):
        return _pdebench_location(f, path, _pdebench_field(f, path, field))
    loc = _other_location(f, path, split)
    if field is not None:
        raise FieldError(f"{path}: an {loc.layout} file (one field); field {field!r} applies to PDEBench CFD files "
                         "with several fields: drop it", "field")
    return loc


def _other_location(f: h5py.File, path, split: str | None) -> Location:
    """locate() for the layouts other than PDEBench's."""
    if "velocity" in f and "particles" in f:
        raise DataFileError(f"{path}: PDEBench's incompressible Navier-Stokes layout ('velocity', 'particles', "
                            "'force', no grid coordinates) is not supported; supported: PDEBench 'tensor' or CFD "
                            "fields with x-/y-/t-coordinate, LPSDA, amg_fast")
    if "u" in f or _plain(f.attrs.get("format")) == "amg_fast":
        u = _require(f, "u", path, "amg_fast")
        x = np.asarray(_require(f, "x", path, "amg_fast"), dtype=np.float64)
        t = np.asarray(_require(f, "t", path, "amg_fast"), dtype=np.float64)
        _check_grids(path, "u", u.shape, x, t)
        _check_dtype(path, "u", u)
        return Location("u", x, t, _attrs(f), "amg_fast", u.shape)
    splits = [k for k in f if isinstance(f[k], h5py.Group) and any(n.startswith("pde_") for n in f[k])]
    if not splits:
        raise DataFileError(
            f"{path}: unrecognised layout: expected 'tensor' or CFD fields (PDEBench), '<split>/pde_{{nt}}-{{nx}}' "
            f"(LPSDA) or 'u' (amg_fast); found keys {sorted(f.keys())}"
        )
    if split is None:
        split = "train" if "train" in splits else splits[0] if len(splits) == 1 else None
        if split is None:
            raise DataFileError(f"{path}: holds splits {sorted(splits)}; pass split=")
    if split not in splits:
        raise DataFileError(f"{path}: no split {split!r}; available: {sorted(splits)}")
    group = f[split]
    name = next(n for n in group if n.startswith("pde_"))
    x, t = _per_trajectory_grid(path, group, "x"), _per_trajectory_grid(path, group, "t")
    _check_grids(path, f"{split}/{name}", group[name].shape, x, t)
    _check_dtype(path, f"{split}/{name}", group[name])
    return Location(f"{split}/{name}", x, t, {**_attrs(f, group), "split": split}, "lpsda", group[name].shape)


def open_file(path) -> h5py.File:
    path = Path(path)
    if path.is_dir():
        raise DataFileError(f"{path}: is a directory; give an HDF5 file")
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    try:
        return h5py.File(path, "r")
    except OSError as err:
        raise DataFileError(f"{path}: not a readable HDF5 file ({err})") from err


def check_finite(path, name: str, u: np.ndarray) -> None:
    if not np.all(np.isfinite(u)):
        bad = np.argwhere(~np.isfinite(u))[0].tolist()
        raise DataFileError(f"{path}: {name} holds NaN or Inf values (first at index {bad})")


def read_trajectories(path, *, split: str | None = None, field: str | None = None) -> Trajectories:
    """Read a PDEBench, LPSDA or amg_fast file -> Trajectories(u [N, T, X], x [X], t [T], attrs);
    2D PDEBench files -> u [N, T, X, Y] with y [Y].

    split picks an LPSDA group (default "train", or the only one); other layouts hold one set.
    field picks one field of a PDEBench CFD file (`density`, `pressure`, `Vx`, `Vy`; needed when it
    holds several).
    """
    with open_file(path) as f:
        loc = locate(f, path, split, field)
        u = np.asarray(f[loc.dataset])
    check_finite(path, loc.dataset, u)
    return Trajectories(u=u, x=loc.x, t=loc.t, attrs=loc.attrs, layout=loc.layout, y=loc.y)
