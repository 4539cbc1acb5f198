r"""Nequix checkpoints (``.nqx``) evaluated natively on jaxcert's graph (``docs/adapters.md`` §4).

A Nequix checkpoint is one line of JSON (the training config: elements, cutoff, irreps, scale and shift)
followed by the Equinox model's array leaves.  The installed ``nequix`` package builds the Equinox
module and fills it (``nequix.model.load_model``); this module does no more than that with nequix's code
and then evaluates the module's per-atom energy on a graph jaxcert builds itself:

* edges i ← j for every pair within the cutoff, as a flat edge list padded to a bucket
  (:func:`jaxcert.core.neighbors.with_edge_list`: matscipy's O(N) neighbour list on the host at every size,
  reused inside a Verlet skin, a larger bucket on overflow), as nequix's own calculator hands them over; with
  ``capacity=N`` instead, rows of the N nearest slots per atom (the earlier layout, kept for comparison);
  the edge vector handed to Nequix is jaxcert's pair vector
  r_j + n·h − r_i, the quantity nequix computes as ``positions[sender] − positions[receiver] +
  shift·cell``, so it is a smooth function of the positions R and the cell h and F = −∇_R E and
  σ = V⁻¹∂E/∂ε are exact derivatives of Nequix's energy (jaxcert's :class:`jaxcert.Model` takes them);
* non-edges (empty slots, pairs beyond the cutoff, padding atoms) hold a vector of length 2·cutoff,
  where Nequix's polynomial envelope and its bias-free radial network give an exactly zero message,
  and padding atoms are left out of the energy sum, so padding is inert;
* the species index is the position of Z in the checkpoint's sorted element list (nequix's own
  convention); the energy is Σ_i [scale·readout_i + shift + E0(Z_i)] over real atoms, nequix's
  ``node_energies``.

The Equinox model is split (``equinox.partition``) into its float arrays, which become the
:class:`jaxcert.Model`'s parameter leaf (so ``jax.grad`` over the weights works), and the static rest.
``import jaxcert`` imports neither nequix nor equinox: both are imported when a checkpoint is loaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.adapters.frameworks import graph_energy, precision_scope
from jaxcert.core.model import Model

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_MAX_BATCH", "CACHE_DIR", "NequixUnavailable", "load_nequix", "save_nequix",
           "nequix_energy"]

#: Default graph layout: ``None``, a flat edge list sized from the structure
#: (:class:`jaxcert.core.neighbors.EdgeListSpec`).
#: An integer N keeps N neighbour slots per atom instead (fcc Cu has 78 neighbours within 6 Å, diamond Si 46,
#: diamond carbon about 160); more turn the energy into NaN.
DEFAULT_CAPACITY: int | None = None
#: Geometries evaluated at once by default (:attr:`jaxcert.Model.max_batch`).
DEFAULT_MAX_BATCH = 16
#: Where ``nequix`` (``nequix.calculator.from_pretrained``) keeps the checkpoints it downloads.
CACHE_DIR = "~/.cache/nequix/models"

_INSTALL = ('pip install "jaxcert[nequix]" && pip install --no-deps nequix==0.4.5 '
            "(nequix's wheel requires jax[cuda12] on Linux; docs/adapters.md §4)")


class NequixUnavailable(ImportError):
    """nequix (or its runtime dependencies equinox, e3nn-jax, jraph) is not installed."""


def _import_nequix_model() -> Any:
    """``nequix.model``, imported without keeping the global matmul-precision change nequix's
    ``__init__`` makes (the energy sets "highest" precision itself, where it evaluates the network)."""
    missing = [m for m in ("nequix", "equinox", "e3nn_jax", "jraph") if importlib.util.find_spec(m) is None]
    if missing:
        raise NequixUnavailable(f"Model.from_nequix needs {', '.join(missing)}: {_INSTALL}")
    before = jax.config.jax_default_matmul_precision
    try:
        import nequix.model as nequix_model
    finally:
        jax.config.update("jax_default_matmul_precision", before)
    return nequix_model


def load_nequix(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """(Equinox Nequix module, config dict) of a ``.nqx`` checkpoint: nequix's ``Nequix`` class built as
    its ``load_model`` builds it (without the OpenEquivariance kernels), but only in shape
    (``equinox.filter_eval_shape``), and filled with the stored leaves; a config with other keys falls
    back to ``nequix.model.load_model`` itself.

    Raises:
      FileNotFoundError: ``path`` is not a file.
      NequixUnavailable: nequix or one of its runtime dependencies is missing.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"no Nequix checkpoint at {str(p)!r} (nequix keeps the ones it downloads in "
                                f"{CACHE_DIR}/<name>.nqx)")
    nequix_model = _import_nequix_model()
    import equinox as eqx

    with open(p, "rb") as f:
        config = json.loads(f.readline().decode())
        try:  # the module's shapes without running its random initialisation (slow), then the leaves;
            # nequix stores float32 leaves (under x64 the skeleton would say float64)
            like = jax.tree.map(_stored_dtype, eqx.filter_eval_shape(lambda: _build(nequix_model.Nequix, config)))
            return eqx.tree_deserialise_leaves(f, like), config
        except (KeyError, TypeError, RuntimeError):  # a config or leaves this loader does not know
            pass
    return nequix_model.load_model(str(p), kernel=False)


def _stored_dtype(x: Any) -> Any:
    """A floating ShapeDtypeStruct as float32, the dtype nequix's checkpoints hold."""
    if isinstance(x, jax.ShapeDtypeStruct) and jnp.issubdtype(x.dtype, jnp.floating):
        return jax.ShapeDtypeStruct(x.shape, jnp.float32)
    return x


def _build(cls: Any, config: dict[str, Any]) -> Any:
    """``cls(...)`` with the constructor arguments nequix's ``load_model`` takes from a checkpoint's config
    (the per-element reference energies are among the stored leaves)."""
    keys = ("hidden_irreps", "lmax", "cutoff", "n_layers", "radial_basis_size", "radial_mlp_size",
            "radial_mlp_layers", "radial_polynomial_p", "mlp_init_scale", "index_weights", "layer_norm", "shift",
            "scale", "avg_n_neighbors")
    return cls(key=jax.random.key(0), n_species=len(config["atomic_numbers"]), kernel=False,
               **{k: config[k] for k in keys})


def nequix_energy(module: Any, config: dict[str, Any], *, dtype: str | None = None, capacity: int | None =
                  DEFAULT_CAPACITY) -> tuple[Callable[[Any, Any], jax.Array], Any, float, tuple[int, ...]]:
    """(energy(params, s) eV, params, cutoff Å, elements) of a loaded Nequix module (module docstring).

    Args:
      module: the Equinox ``nequix.model.Nequix`` (from :func:`load_nequix`).
      config: its checkpoint config (``atomic_numbers``: the elements, in any order).
      dtype: "float32" or "float64": the network runs in that precision whatever the structure's dtype
        (positions and cell cast in, the energy cast back, so derivatives flow through the casts) and the
        parameters are stored in it; ``None``: the network follows the structure's dtype (the stored float32
        weights are cast to it inside the energy).  "float64" needs JAX's x64 mode.
      capacity: ``None`` (default): the flat edge list of a prepared structure (any structure not prepared for
        edges gets every candidate slot of :func:`jaxcert.core.neighbors.pairs`); N: N neighbour slots per atom
        (a static shape; more neighbours within the cutoff give NaN, never a truncated sum).
    """
    import equinox as eqx

    if dtype not in (None, "float32", "float64"):
        raise ValueError(f"dtype must be 'float32', 'float64' or None, got {dtype!r}")
    if dtype == "float64" and not jax.config.read("jax_enable_x64"):
        raise ValueError("dtype float64 needs JAX's x64 mode (jax.config.update('jax_enable_x64', True); the CLI "
                         "enables it with --dtype float64)")
    if capacity is not None and int(capacity) < 1:
        raise ValueError(f"capacity must be a positive number of neighbour slots, got {capacity!r}")
    params, static = eqx.partition(module, eqx.is_inexact_array)
    if dtype is not None:
        params = jax.tree.map(lambda x: jnp.asarray(x, dtype), params)
    elements = tuple(sorted(int(z) for z in config["atomic_numbers"]))
    cutoff = float(module.cutoff)

    def node_energies(prm: Any, g: Any) -> jax.Array:
        dt = g.edge_vectors.dtype
        net = eqx.combine(jax.tree.map(lambda x: x.astype(dt), prm), static)
        with jax.default_matmul_precision("highest"):  # as nequix sets globally (full float32 on GPUs)
            e = net.node_energies(g.edge_vectors, g.species, g.senders, g.receivers)
        return e[:, 0]

    summed = graph_energy(node_energies, cutoff, elements, None if capacity is None else int(capacity))

    def energy(prm: Any, s: Any) -> jax.Array:
        out = s.positions.dtype
        if dtype is not None:
            s = s.replace(positions=s.positions.astype(dtype), cell=s.cell.astype(dtype))
        # The network is traced in its own precision.  Under JAX's x64 mode e3nn-jax's numpy float64 constants
        # would otherwise promote a float32 network's features to float64: 3,151 of its 4,315 array results on
        # the 100-atom NaCl cell were float64, so it was not the float32 model.
        with precision_scope(s.positions.dtype):
            e = summed(prm, s)
        return e.astype(out)

    return energy, params, cutoff, elements


def from_nequix(path: str | Any, dtype: str | None = None, *,
                capacity: int | None = DEFAULT_CAPACITY,
                max_batch: int | None = DEFAULT_MAX_BATCH, name: str | None = None) -> Model:
    """A Nequix checkpoint (``.nqx``, e.g. ``nequix-mp-1.nqx``) as a Model (``docs/adapters.md`` §4).

    nequix's own loader builds the Equinox model; jaxcert evaluates its per-atom energies on its own
    graph, handing it the exact pair vectors r_j + n·h − r_i (all periodic images), so forces and stress
    are exact derivatives of Nequix's energy.  The Equinox model's float arrays are the parameter leaf
    (``jax.grad`` over the weights works); elements and cutoff come from the checkpoint.

    Args:
      path: the checkpoint file (nequix keeps the ones it downloads in ``~/.cache/nequix/models``).
      dtype: "float32" or "float64" to run the network in that precision whatever the structure's
        dtype, or ``None`` to follow the structure's dtype.  "float64" needs JAX's x64 mode.
      capacity: ``None`` (default): a flat edge list padded to a bucket, sized from each structure and
        enlarged on overflow; N: N neighbour slots per atom within the 6 Å cutoff instead (more give NaN,
        never a truncated sum).
      max_batch: geometries evaluated at once (default :data:`jaxcert.adapters.nequix.DEFAULT_MAX_BATCH`; ``None``:
        no limit).
      name: report label (default ``nequix:<file stem>``, plus ``@dtype`` when given).

    Raises:
      FileNotFoundError: no file at ``path``.
      jaxcert.adapters.nequix.NequixUnavailable: nequix, equinox, e3nn-jax or jraph is not installed.
      ValueError: a bad ``dtype`` or ``capacity``, or "float64" without x64.
    """
    if dtype not in (None, "float32", "float64"):
        raise ValueError(f"dtype must be 'float32', 'float64' or None, got {dtype!r}")
    module, config = load_nequix(path)
    fn, params, cutoff, elements = nequix_energy(module, config, dtype=dtype, capacity=capacity)
    stem = Path(path).name.removesuffix(".nqx")
    label = name or f"nequix:{stem}" + (f"@{dtype}" if dtype else "")
    where = Path(path).expanduser().resolve()  # one file, one identity, however its path is spelled (resume)
    info = (("source", f"Nequix checkpoint {where}"), ("adapter", "docs/adapters.md §4"),
            ("graph", "edge list" if capacity is None else f"{capacity} slots per atom"),
            ("precision", dtype or "structure dtype"),
            ("parameters", str(sum(int(x.size) for x in jax.tree.leaves(params)))),
            ("checkpoint", stem), ("checkpoint_file", str(where)))
    if config.get("train_path"):  # what the checkpoint itself states about its training set (model card)
        info += (("training_data", f"nequix checkpoint config train_path: {config['train_path']}"),)
    return Model(energy_fn=fn, params=params, name=label, cutoff=cutoff, elements=elements, info=info,
                 max_batch=max_batch, edges=capacity is None)

def save_nequix(model: Model, params: Any, path: str | os.PathLike[str]) -> str:
    """Write ``params`` (a :func:`from_nequix` model's parameter pytree, e.g. repaired by
    :func:`jaxcert.repair.repair`) as a ``.nqx`` checkpoint in nequix's own format (its config line, then
    ``equinox.tree_serialise_leaves`` of the module, float32 leaves as nequix stores them), so that nequix's
    ``load_model`` and ``NequixCalculator`` load it.  The module's structure and config come from the checkpoint
    ``model`` was loaded from.  Written atomically, never through a link.  Returns the path.

    Raises:
      ValueError: ``model`` was not loaded from a Nequix checkpoint, or ``params`` do not fit its module.
    """
    import io

    import equinox as eqx

    from jaxcert.core.files import atomic_write

    src = dict(model.info).get("checkpoint_file")
    if src is None:
        raise ValueError(f"model {model.name!r} was not loaded from a Nequix checkpoint (no checkpoint_file)")
    module, config = load_nequix(src)
    old, static = eqx.partition(module, eqx.is_inexact_array)
    mine, theirs = jax.tree.leaves(params), jax.tree.leaves(old)
    if len(mine) != len(theirs) or any(jnp.shape(a) != jnp.shape(b) for a, b in zip(mine, theirs, strict=True)):
        raise ValueError("params: the pytree does not fit the checkpoint's module")
    leaves = [jnp.asarray(a, b.dtype) for a, b in zip(mine, theirs, strict=True)]
    new = eqx.combine(jax.tree.unflatten(jax.tree.structure(old), leaves), static)
    buf = io.BytesIO()
    buf.write((json.dumps(config) + "\n").encode())
    eqx.tree_serialise_leaves(buf, new)
    atomic_write(path, buf.getvalue())
    return os.fspath(path)


# -------------------------------------------------------------- plumbing
