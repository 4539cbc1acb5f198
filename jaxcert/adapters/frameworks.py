r"""Adapters: energy functions of the JAX MLIP libraries users already have, as jaxcert energies.

:meth:`jaxcert.Model.from_jax_md`, :meth:`jaxcert.Model.from_graph_module` and
:meth:`jaxcert.Model.from_flax` wrap the functions built here into a :class:`jaxcert.Model`
(``docs/adapters.md``).  Nothing here imports jax-md or Flax: the user's objects are
duck-typed (a jax-md neighbour-list format enum carries its module, whose ``NeighborList``
class is used).

**jax-md** (``docs/adapters.md`` §1).  A jax-md energy takes positions (fractional for
``space.periodic_general`` with ``fractional_coordinates=True``), optionally a neighbour
list, and keyword arguments that reach its displacement function.  jaxcert evaluates it as
an exact function of the Cartesian positions R and the cell h:

* cells thinner than two cutoffs are tiled into a (2K+1)-fold supercell along each periodic
  axis (K the structure's static image count, :func:`jaxcert.core.neighbors.with_images`), and
  E = E_supercell / copies, so jax-md's minimum image (valid while r_c is below half of every
  plane spacing) is never wrong; non-periodic axes of a slab or cluster are replaced by
  vacuum vectors longer than the extent of the atoms plus two cutoffs;
* the cell enters as ``box=h₀ᵀ`` (h₀ = h held constant) and ``perturbation=F`` with
  F = (h₀⁻¹h)ᵀ (identity in value), and the positions as y = F⁻¹R, so every displacement is
  F·(y_j − y_i − n·h₀) = r_j − r_i − n·h exactly and stays differentiable in (R, h);
  jax-md's ``transform`` passes position tangents through in Cartesian units (its custom JVP),
  so the fractional input is fed as u₀ + (y − y₀) (value u₀ = y₀h₀⁻¹, tangent that of y);
* a neighbour-list energy gets a list built by jaxcert (:func:`jaxcert.core.neighbors.pairs`, every
  pair within the cutoff, padding atoms excluded) in the format it was written for, so the
  user's ``neighbor_fn.allocate``/``update`` and its capacity never limit the result.

Hence F = −∇_R E, σ = V⁻¹ ∂E/∂ε and every mixed derivative are those of the energy itself
(``tests/test_adapters_jax_md.py`` checks them against jaxcert's own Stillinger–Weber and
against finite differences).

**Graph modules** (``docs/adapters.md`` §2).  `build_graph` builds a :class:`Graph`
(senders, receivers, edge vectors r_j + image − r_i within the cutoff, species, masks) from
:func:`jaxcert.core.neighbors.pairs`; the module maps ``(params, graph)`` to per-node energies
(summed over real atoms) or to the total energy.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from ase.data import atomic_numbers

from jaxcert.core.geometry import inv3
from jaxcert.core.model import Model
from jaxcert.core.neighbors import EdgeListSpec, listed_edges, pairs, with_images
from jaxcert.core.structure import MAX_Z, Structure, StructureError, UnsupportedStructure

__all__ = ["Graph", "build_graph", "species_table", "jax_md_energy", "graph_energy", "flax_apply", "mlip_energy",
           "precision_scope",
           "SPACES"]

#: The jax-md spaces the adapter supports (``jax_md.space.free`` and ``jax_md.space.periodic_general``).
SPACES = ("free", "periodic_general")

_FORMATS = {"Dense": "dense", "Sparse": "sparse", "OrderedSparse": "ordered_sparse"}


# ------------------------------------------------------------------------------------------------ species
def species_table(species: Sequence[int | str] | None) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """(table, elements): ``table[Z]`` is the index of element Z in ``species`` (−1 if absent).

    ``species`` lists the elements in the order of the model's species index (atomic numbers or
    symbols); ``None`` gives the identity (index = Z) and no element restriction.
    """
    if species is None:
        return np.arange(MAX_Z + 1, dtype=np.int32), None
    zs = []
    for el in species:
        z = atomic_numbers.get(el) if isinstance(el, str) else int(el)
        if z is None or not 0 < z <= MAX_Z:
            raise ValueError(f"species: unknown element {el!r}")
        zs.append(z)
    if len(set(zs)) != len(zs):
        raise ValueError(f"species: repeated element in {list(species)!r}")
    table = np.full(MAX_Z + 1, -1, np.int32)
    table[zs] = np.arange(len(zs), dtype=np.int32)
    return table, tuple(zs)


# ------------------------------------------------------------------------------------------------ edges
def _edges(s: Structure, cutoff: float, capacity: int | None):
    """(dR, j, valid, ok): candidate slots (n, m) within ``cutoff`` between real atoms.

    With ``capacity`` the nearest ``capacity`` slots per atom are kept (chosen on stop-gradient
    distances, so derivatives are exact); ``ok`` is False when an atom has more neighbours than that.
    """
    p = pairs(s, cutoff)
    dR, j = p.dR, p.j
    valid = p.mask & (jax.lax.stop_gradient(p.r) < cutoff)
    ok = jnp.asarray(True)
    m = valid.shape[-1]
    if capacity is not None and capacity < m:
        key = jnp.where(valid, jax.lax.stop_gradient(p.r), jnp.inf)
        _, idx = jax.lax.top_k(-key, capacity)
        ok = ~jnp.any(jnp.sum(valid, axis=-1) > capacity)
        dR = jnp.take_along_axis(dR, idx[..., None], axis=-2)
        j = jnp.take_along_axis(j, idx, axis=-1)
        valid = jnp.take_along_axis(valid, idx, axis=-1)
    return dR, j, valid, ok


def precision_scope(dtype: Any) -> Any:
    """A context that traces a network in the precision of ``dtype``: JAX's x64 mode on for float64, off
    otherwise.

    Under x64, numpy float64 constants inside a network (e3nn-jax keeps its coefficients so) promote a float32
    network's features to float64: the model computes in neither precision, slower, and not as its authors run
    it.  Every adapter evaluates the network in this scope, on inputs already in ``dtype``; derivatives flow
    through it unchanged (docs/adapters.md, "Precision")."""
    return jax.enable_x64(jnp.dtype(dtype) == jnp.float64)


def _nan_unless(ok: jax.Array, dtype: Any) -> jax.Array:
    """1 where ``ok``, NaN elsewhere (a factor, so every derivative is NaN too)."""
    return jnp.where(ok, 1.0, jnp.nan).astype(dtype)


# ------------------------------------------------------------------------------------------------ graphs
class Graph(NamedTuple):
    """The graph a graph module receives (one unbatched structure; static shapes).

    Attributes:
      numbers: (n,) atomic numbers.
      species: (n,) index of each atom's element in the adapter's ``species`` (Z itself without one);
        0 on padding atoms.
      node_mask: (n,) True for real atoms (padding atoms must contribute nothing).
      senders: (E,) index j of the neighbour (message source).
      receivers: (E,) index i of the atom receiving the message.
      edge_vectors: (E, 3) r_j + image − r_i in Å; differentiable in positions and cell.
        Masked edges hold (0, 0, 2·cutoff): beyond the cutoff and never of length zero.
      edge_mask: (E,) True for a real edge (both atoms real, distance below the cutoff).
    """

    numbers: jax.Array
    species: jax.Array
    node_mask: jax.Array
    senders: jax.Array
    receivers: jax.Array
    edge_vectors: jax.Array
    edge_mask: jax.Array


def build_graph(s: Structure, cutoff: float, species: Sequence[int | str] | None = None,
                capacity: int | None = None) -> tuple[Graph, jax.Array]:
    """(graph, ok) of an unbatched, prepared structure: directed edges i ← j with |r_j + image − r_i| < cutoff.

    A structure that carries an edge list (:class:`jaxcert.core.neighbors.EdgeListSpec`, what
    :meth:`jaxcert.Model.prepare` gives a graph network) yields its flat edges, padded to the list's bucket
    (receivers ascending; empty slots are masked); ``ok`` is False after an overflow.  Otherwise edges come from
    :func:`jaxcert.core.neighbors.pairs` as rows of slots per atom, flattened; ``capacity`` then keeps the nearest
    slots per atom and ``ok`` is False if an atom has more neighbours than that (``docs/adapters.md`` §2).
    Masked edges hold the vector (0, 0, 2·cutoff).
    """
    if s.positions.ndim != 2:
        raise StructureError("graph takes an unbatched structure; vmap over batches")
    table, _ = species_table(species)
    dt = s.positions.dtype
    far = jnp.asarray([0.0, 0.0, 2.0 * cutoff], dt)
    spec = jnp.where(s.mask, jnp.asarray(table)[s.numbers], 0)
    if isinstance(s.neighbor_list, EdgeListSpec):
        e = listed_edges(s, cutoff)
        vec = jnp.where(e.mask[:, None], jnp.stack(e.vectors, axis=-1), far)
        g = Graph(numbers=s.numbers, species=spec, node_mask=s.mask, senders=e.senders.astype(jnp.int32),
                  receivers=e.receivers.astype(jnp.int32), edge_vectors=vec, edge_mask=e.mask)
        return g, e.ok
    dR, j, valid, ok = _edges(s, cutoff, capacity)
    n, m = valid.shape
    vec = jnp.where(valid[..., None], dR, far).reshape(n * m, 3)
    g = Graph(numbers=s.numbers, species=spec, node_mask=s.mask, senders=j.reshape(-1).astype(jnp.int32),
              receivers=jnp.repeat(jnp.arange(n, dtype=jnp.int32), m), edge_vectors=vec,
              edge_mask=valid.reshape(-1))
    return g, ok


def graph_energy(apply_fn: Callable[[Any, Graph], jax.Array], cutoff: float,
                 species: Sequence[int | str] | None = None, capacity: int | None = None
                 ) -> Callable[[Any, Structure], jax.Array]:
    """``energy(params, s)`` = Σ over real atoms of ``apply_fn(params, graph(s))`` (per-node output), or
    the output itself when it is a scalar (the module then owns the masks); eV."""

    def energy(params: Any, s: Structure) -> jax.Array:
        g, ok = build_graph(s, cutoff, species, capacity)
        with precision_scope(s.positions.dtype):
            out = jnp.asarray(apply_fn(params, g))
        n = s.n_atoms
        if out.ndim == 0:
            E = out
        elif out.size == n:
            E = jnp.sum(jnp.where(s.mask, out.reshape(n), 0.0))
        else:
            raise ValueError(f"the graph module returned shape {out.shape}; expected a scalar or ({n},) or "
                             f"({n}, 1) per-node energies")
        return E * _nan_unless(ok, E.dtype)

    return energy


def flax_apply(module: Any, params: Any) -> tuple[Callable[[Any, Graph], jax.Array], Any]:
    """(apply_fn, params) of a Flax module: linen ``module.apply(variables, graph)`` with ``params`` the
    variables; or, with ``params=None``, an ``flax.nnx`` module split into (graphdef, state) so the
    state is the parameter pytree (``docs/adapters.md`` §2)."""
    nnx = sys.modules.get("flax.nnx")
    if params is None:
        if nnx is None or not isinstance(module, nnx.Module):
            raise TypeError("from_flax: pass params=variables for a flax.linen module (module.init(key, graph)); "
                            f"params=None is only for a flax.nnx.Module, got {type(module).__name__}")
        graphdef, state = nnx.split(module)
        return (lambda st, g: nnx.merge(graphdef, st)(g)), state
    if not callable(getattr(module, "apply", None)):
        raise TypeError(f"from_flax: {type(module).__name__} has no .apply; pass a flax.linen module and its "
                        "variables, or a flax.nnx module with params=None")
    return module.apply, params


# ------------------------------------------------------------------------------------------------ jax-md
def _format_of(neighbor_format: Any) -> tuple[str | None, Any]:
    """('dense' | 'sparse' | 'ordered_sparse' | None, the jax_md.partition module)."""
    if neighbor_format is None:
        return None, None
    name = getattr(neighbor_format, "name", None)
    module = sys.modules.get(type(neighbor_format).__module__)
    if name not in _FORMATS or module is None or not hasattr(module, "NeighborList"):
        raise TypeError("neighbor_format must be a jax_md.partition.NeighborListFormat (partition.Dense, "
                        f"partition.Sparse or partition.OrderedSparse), got {neighbor_format!r}")
    return _FORMATS[name], module


def _supercell(s: Structure, cutoff: float) -> tuple[Structure, int]:
    """(s tiled (2K+1)-fold along each periodic axis, number of copies); K = the static image count."""
    if not s.periodic:
        return s, 1
    s = with_images(s, cutoff)
    K = tuple(k if p else 0 for k, p in zip(s.images, s.pbc, strict=True))
    copies = int(np.prod([2 * k + 1 for k in K]))
    if copies == 1:
        return s, 1
    shifts = np.array(list(itertools.product(*[range(-k, k + 1) for k in K])), np.float64)
    order = np.argsort(np.abs(shifts).sum(1), kind="stable")  # the original cell first
    shifts = jnp.asarray(shifts[order], s.dtype)
    n = s.n_atoms
    R = (s.positions[None, :, :] + (shifts @ s.cell)[:, None, :]).reshape(copies * n, 3)
    mult = jnp.asarray([2 * k + 1 for k in K], s.dtype)
    tile = lambda x: jnp.tile(x, copies)  # noqa: E731
    sc = Structure(positions=R, numbers=tile(s.numbers), cell=s.cell * mult[:, None], masses=tile(s.masses),
                   mask=tile(s.mask), pbc=s.pbc, images=(0, 0, 0), image_cutoff=s.image_cutoff)
    return sc, copies


def _vacuum_cell(s: Structure, cutoff: float) -> jax.Array:
    """The cell with every non-periodic row replaced by a vacuum vector (held constant) orthogonal to the
    periodic rows, longer than the atoms' extent along it plus two cutoffs, so no image interacts."""
    h = s.cell
    per = [a for a in range(3) if s.pbc[a]]
    if len(per) == 3:
        return h
    x = jax.lax.stop_gradient(s.positions)
    hs = jax.lax.stop_gradient(h)
    dirs: list[jax.Array] = []
    if len(per) == 2:
        nrm = jnp.cross(hs[per[0]], hs[per[1]])
        dirs = [nrm / jnp.linalg.norm(nrm)]
    elif len(per) == 1:
        a = hs[per[0]] / jnp.linalg.norm(hs[per[0]])
        e = jnp.eye(3, dtype=h.dtype)[jnp.argmin(jnp.abs(a))]
        u1 = jnp.cross(a, e)
        u1 = u1 / jnp.linalg.norm(u1)
        dirs = [u1, jnp.cross(a, u1)]
    else:
        dirs = list(jnp.eye(3, dtype=h.dtype))
    rows = list(h)
    for a, d in zip([a for a in range(3) if not s.pbc[a]], dirs, strict=True):
        proj = x @ d
        hi = jnp.max(jnp.where(s.mask, proj, -jnp.inf))
        lo = jnp.min(jnp.where(s.mask, proj, jnp.inf))
        rows[a] = d * (hi - lo + 2.0 * cutoff + 1.0)
    return jnp.stack(rows)


def _periodic_general_inputs(s: Structure, cutoff: float, fractional: bool) -> tuple[jax.Array, dict[str, Any]]:
    """(positions argument, {box, perturbation}) that make a periodic_general energy exact in (R, h)."""
    h = _vacuum_cell(s, cutoff)
    h0 = jax.lax.stop_gradient(h)
    F = (inv3(h0) @ h).T  # column convention: the deformation taking h0's lattice vectors to h's; I in value
    y = s.positions @ inv3(F).T  # F^{-1} r, row by row; equal to r in value
    y0 = jax.lax.stop_gradient(y)
    R = (y0 @ inv3(h0) + (y - y0)) if fractional else y
    return R, {"box": h0.T, "perturbation": F}


def _jax_md_neighbors(s: Structure, cutoff: float, capacity: int | None, fmt: str, partition: Any):
    """(jax-md NeighborList in ``fmt``, ok) of every pair within the cutoff between real atoms."""
    _, j, valid, ok = _edges(s, cutoff, capacity)
    n, m = valid.shape
    i = jnp.broadcast_to(jnp.arange(n)[:, None], (n, m))
    if fmt == "ordered_sparse":
        valid = valid & (i < j)
    if fmt == "dense":
        idx = jnp.where(valid, j, n).astype(jnp.int32)
    else:
        idx = jnp.stack([jnp.where(valid, i, n).reshape(-1), jnp.where(valid, j, n).reshape(-1)]).astype(jnp.int32)
    enum = {"dense": partition.Dense, "sparse": partition.Sparse, "ordered_sparse": partition.OrderedSparse}[fmt]
    nbr = partition.NeighborList(
        idx=idx, reference_position=s.positions, error=partition.PartitionError(jnp.zeros((), jnp.uint8)),
        cell_list_capacity=None, max_occupancy=int(idx.shape[-1]), format=enum, cell_size=None,
        cell_list_fn=None, update_fn=None)
    return nbr, ok


def jax_md_energy(energy_fn: Callable[..., jax.Array], cutoff: float, *, space: str = "periodic_general",
                  fractional_coordinates: bool = True, neighbor_format: Any = None,
                  species: Sequence[int | str] | None = None, species_arg: str = "species", one_hot: bool = False,
                  capacity: int | None = None, with_params: bool = False) -> Callable[[Any, Structure], jax.Array]:
    """``energy(params, s)`` (eV) of a jax-md energy function, exact in positions and cell (module docstring).

    Args:
      energy_fn: jax-md energy, ``energy_fn([params,] R[, neighbor], **kwargs)``.
      cutoff: its interaction range in Å (neighbour lists, periodic images, vacuum).
      space: ``"periodic_general"`` (built with ``jax_md.space.periodic_general``) or ``"free"``.
      fractional_coordinates: as given to ``periodic_general`` (its default is True).
      neighbor_format: the ``jax_md.partition`` format the energy expects (``partition.Dense``, ...), or
        None for an energy without a neighbour list.
      species: elements in the order of the model's species index; passed as ``species_arg`` (integers,
        or a one-hot (n, len(species)) array with ``one_hot``; padding atoms get a zero row).
      capacity: neighbours kept per atom (NaN if exceeded); None keeps every candidate slot.
      with_params: call ``energy_fn(params, R, ...)`` (e.g. a jax-md NequIP) instead of ``energy_fn(R, ...)``.
    """
    if space not in SPACES:
        raise ValueError(f"space must be one of {SPACES} (jax_md.space.free or jax_md.space.periodic_general), "
                         f"got {space!r}")
    fmt, partition = _format_of(neighbor_format)
    table, _ = species_table(species)
    if one_hot and species is None:
        raise ValueError("one_hot=True needs species (the elements in the order of the one-hot columns)")
    rc = float(cutoff)
    if not rc > 0:
        raise ValueError(f"cutoff must be positive (Å), got {cutoff!r}")

    def energy(params: Any, s: Structure) -> jax.Array:
        if s.positions.ndim != 2:
            raise StructureError("a jax-md energy takes an unbatched structure; vmap over batches")
        if space == "free":
            if s.periodic:
                raise UnsupportedStructure(f"this jax-md energy was built on jax_md.space.free(); it cannot "
                                           f"evaluate a periodic structure (pbc={s.pbc})")
            sc, copies = s, 1
        else:
            sc, copies = _supercell(s, rc)
        dt = sc.positions.dtype
        n = sc.n_atoms
        kw: dict[str, Any] = {}
        ok = jnp.asarray(True)
        args: list[Any] = [params] if with_params else []
        if species is not None:
            idx = jnp.where(sc.mask, jnp.asarray(table)[sc.numbers], 0)
            if one_hot:
                kw[species_arg] = jax.nn.one_hot(idx, len(species), dtype=dt) * sc.mask[:, None].astype(dt)
            else:
                kw[species_arg] = idx
        x = sc.positions
        if fmt is None and not sc.periodic:  # every pair, a cluster: padding atoms moved out of reach
            top = jnp.max(jnp.where(sc.mask[:, None], jax.lax.stop_gradient(x), -jnp.inf))
            far = top + (2.0 * rc + 1.0) * (1.0 + jnp.arange(n, dtype=dt))  # > r_c from all and each other
            x = jnp.where(sc.mask[:, None], x, jax.lax.stop_gradient(far)[:, None])
            sc = sc.replace(positions=x, mask=jnp.ones_like(sc.mask))  # the vacuum now holds them too
        elif fmt is None:  # every pair in a periodic cell: a padding atom cannot be taken out
            ok = jnp.all(sc.mask)
        if space == "periodic_general":
            R, extra = _periodic_general_inputs(sc, rc, fractional_coordinates)
            kw.update(extra)
        else:
            R = x
        args.append(R)
        if fmt is not None:
            nbr, ok = _jax_md_neighbors(sc, rc, capacity, fmt, partition)
            args.append(nbr)
        with precision_scope(dt):
            E = jnp.asarray(energy_fn(*args, **kw))
        if E.ndim != 0:
            raise ValueError(f"the jax-md energy returned shape {E.shape}; expected a scalar (eV)")
        return E / copies * _nan_unless(ok, E.dtype)

    return energy


# ------------------------------------------------------------------------------------------------ mlip
def mlip_energy(force_field: Any, capacity: int | None = None
                ) -> tuple[Callable[[Any, Structure], jax.Array], float, tuple[int, ...], str]:
    """(energy(params, s), cutoff Å, elements, network name) of an InstaDeep ``mlip`` ``ForceField``.

    jaxcert builds mlip's own ``Graph`` from its neighbour search (``docs/adapters.md`` §3): nodes are the
    structure's atom slots plus one padding node in a second, padding graph (mlip's convention for
    padding: its masks drop the last graph); the edges are the pairs within the cutoff, receiver i and
    sender j, with mlip's edge vector ``R[receiver] − R[sender] + shift·cell`` = r_i − (r_j + k·h), so the
    integer image offsets k are recovered from jaxcert's pairs (on stop-gradient values) and the
    positions R and cell h enter exactly as mlip uses them: F = −∇_R E and σ = V⁻¹∂E/∂ε are exact.
    Slots that are not a pair within the cutoff become edges of the padding node (zero vectors, masked
    by mlip).  The energy is the sum of the network's per-node energies over real atoms; the weights
    (``force_field.params``) are the Model's parameter leaf.
    """
    predictor = getattr(force_field, "predictor", None)
    network = getattr(predictor, "mlip_network", None)
    if network is None or not hasattr(force_field, "params") or not hasattr(force_field, "cutoff_distance"):
        raise TypeError(f"from_mlip: expected an mlip.models.ForceField, got {type(force_field).__name__}")
    from mlip.graph import Graph as MlipGraph  # the user's mlip: only reached with an mlip ForceField
    from mlip.graph import GraphEdges, GraphGlobals, GraphNodes
    from mlip.graph.edge_ordering import DEFAULT_EDGE_ORDERING

    config, info = network.config, network.dataset_info
    refused = [name for name in ("use_coulomb_term", "use_total_charge_embedding") if getattr(config, name, False)]
    if getattr(info, "long_range_cutoff_angstrom", None) is not None:
        refused.append("long_range_cutoff_angstrom")
    if getattr(force_field, "inference_context", None) is not None:
        refused.append("inference_context (call force_field.prepare_experts_for_inference() and drop it)")
    if refused:
        raise ValueError(f"from_mlip: this ForceField uses {', '.join(refused)}; the adapter evaluates "
                                   "short-range energies of neutral structures only (docs/adapters.md §3)")
    cutoff = float(force_field.cutoff_distance)
    elements = tuple(sorted(int(z) for z in force_field.allowed_atomic_numbers))
    z_pad = elements[0]

    def node_energies(module: Any, graph: Any) -> jax.Array:
        return module.mlip_network(graph).nodes.features["energy"]

    def energy(params: Any, s: Structure) -> jax.Array:
        if s.positions.ndim != 2:
            raise StructureError("from_mlip takes an unbatched structure; vmap over batches")
        dR, j, valid, ok = _edges(s, cutoff, capacity)
        n, m = valid.shape
        R, dt = s.positions, s.positions.dtype
        if s.periodic:  # r_j + k·h − r_i = dR: the integer offsets k, exact on stop-gradient values
            t = jax.lax.stop_gradient(dR - (R[j] - R[:, None, :]))
            h = jax.lax.stop_gradient(_vacuum_cell(s, cutoff))
            k = jnp.round(t @ inv3(h)) * jnp.asarray(s.pbc, dt)
        else:
            k = jnp.zeros_like(dR)
        pad = n  # the padding node
        graph = MlipGraph(
            nodes=GraphNodes(positions=jnp.concatenate([R, jnp.zeros((1, 3), dt)]),
                             atomic_numbers=jnp.concatenate([jnp.where(s.mask, s.numbers, z_pad),
                                                             jnp.full((1,), z_pad, s.numbers.dtype)])),
            edges=GraphEdges(shifts=jnp.where(valid[..., None], -k, 0.0).reshape(n * m, 3), displ_fun=None),
            globals=GraphGlobals(cell=jnp.stack([s.cell, jnp.zeros((3, 3), dt)]), weight=jnp.ones(2, dt)),
            n_node=jnp.asarray([n, 1]), n_edge=jnp.asarray([n * m, 0]),
            senders=jnp.where(valid, j, pad).reshape(-1).astype(jnp.int32),
            receivers=jnp.where(valid, jnp.arange(n, dtype=jnp.int32)[:, None], pad).reshape(-1),
        ).sort_edges(DEFAULT_EDGE_ORDERING)
        with precision_scope(dt):
            e = jnp.asarray(predictor.apply(params, graph, method=node_energies)).reshape(n + 1)
        E = jnp.sum(jnp.where(s.mask, e[:n], 0.0))
        return E * _nan_unless(ok, E.dtype)

    return energy, cutoff, elements, type(network).__name__


# ------------------------------------------------------------- Model constructors
def from_jax_md(energy_fn: Callable[..., jax.Array], *, cutoff: float, space: str = "periodic_general",
                fractional_coordinates: bool = True, neighbor_format: Any = None, params: Any = None,
                species: Any = None, species_arg: str = "species", one_hot: bool = False,
                capacity: int | None = None, name: str = "jax-md") -> Model:
    """A jax-md energy function as a Model, exact in positions and cell (``docs/adapters.md`` §1).

    ``energy_fn`` is what jax-md built, e.g. ``energy.lennard_jones_pair(displacement)`` on
    ``space.periodic_general(box)`` or ``space.free()`` (``space="periodic_general"`` or ``"free"``), or the
    energy of a neighbour-list pair (``neighbor_format=partition.Dense``, ``Sparse`` or ``OrderedSparse``, the
    format its ``neighbor_fn`` was built with: jaxcert builds the list itself, every pair within ``cutoff``
    Å, all periodic images, padding excluded).  With ``params`` the call is ``energy_fn(params, R, ...)``
    (a jax-md NequIP) and the weights are the Model's parameter leaf.  ``species`` lists the elements in the
    order of the species index, passed as ``species_arg`` (integers, or one-hot with ``one_hot``).
    Identities tested (``tests/test_adapters_jax_md.py``): E, F = −∇E and σ = V⁻¹∂E/∂ε equal jaxcert's own
    Stillinger–Weber to 1e-10 in float64; forces and stress agree with finite differences.
    """
    fn = jax_md_energy(energy_fn, cutoff, space=space, fractional_coordinates=fractional_coordinates,
                                 neighbor_format=neighbor_format, species=species, species_arg=species_arg,
                                 one_hot=one_hot, capacity=capacity, with_params=params is not None)
    _, elements = species_table(species)
    return Model(energy_fn=fn, params=params, name=name, cutoff=float(cutoff), elements=elements,
               info=(("source", f"jax-md energy function ({space})"), ("adapter", "docs/adapters.md §1")))

def from_graph_module(apply_fn: Callable[[Any, Any], jax.Array], params: Any, *, cutoff: float,
                      species: Any = None, capacity: int | None = None, name: str = "graph-module") -> Model:
    """A graph network ``apply_fn(params, graph) -> per-node energies (n,) or total`` as a Model.

    jaxcert builds the :class:`jaxcert.Graph` (edges i ← j within ``cutoff`` Å from
    :func:`jaxcert.core.neighbors.pairs`, all periodic images, padding masked) and sums the per-node output over
    real atoms; ``params`` is the Model's parameter leaf, so ``jax.grad`` over the weights works
    (``docs/adapters.md`` §2).  Identities tested (``tests/test_adapters_graph.py``): F = −∇E against
    finite differences, rotation invariance of E at the float floor.
    """
    _, elements = species_table(species)
    fn = graph_energy(apply_fn, float(cutoff), species, capacity)
    return Model(energy_fn=fn, params=params, name=name, cutoff=float(cutoff), elements=elements,
                 info=(("source", "graph module"), ("adapter", "docs/adapters.md §2")), edges=capacity is None)

def from_flax(module: Any, params: Any = None, *, cutoff: float, species: Any = None,
              capacity: int | None = None, name: str = "flax") -> Model:
    """A Flax module taking a :class:`jaxcert.Graph`: linen with its ``variables`` (``module.apply``), or
    an ``nnx`` module with ``params=None`` (its state becomes the parameter leaf); see
    :meth:`from_graph_module` and ``docs/adapters.md`` §2."""
    apply_fn, prm = flax_apply(module, params)
    return from_graph_module(apply_fn, prm, cutoff=cutoff, species=species, capacity=capacity, name=name)

def from_mlip(force_field: Any, *, capacity: int | None = None, name: str | None = None) -> Model:
    """An InstaDeep ``mlip`` ``ForceField`` (NequIP, MACE, ViSNet, ...) as a Model (``docs/adapters.md`` §3).

    jaxcert builds mlip's ``Graph`` from its own neighbour search, with the integer image shifts and the
    cell mlip expects, so forces and stress are exact derivatives of mlip's energy; the force field's
    ``params`` become the Model's parameter leaf and its ``allowed_atomic_numbers`` the supported
    elements.  Models with a Coulomb term, a total-charge embedding, a long-range graph or an inference
    context are refused.  Identities tested (``tests/test_adapters_mlip.py``): E, F and σ equal the
    ForceField's own prediction on mlip's own graph (float64), for bulk, slab, cluster and padded input.
    """
    fn, cutoff, elements, net = mlip_energy(force_field, capacity)
    return Model(energy_fn=fn, params=force_field.params, name=name or f"mlip-{net.lower()}", cutoff=cutoff,
               elements=elements, info=(("source", f"mlip ForceField ({net})"), ("adapter", "docs/adapters.md §3")))
