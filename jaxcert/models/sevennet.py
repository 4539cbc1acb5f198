r"""SevenNet (SevenNet-0, SevenNet-MF-0, SevenNet-l3i5) natively in JAX, with e3nn-jax.

``jaxcert.models.get("jax-sevennet", checkpoint="7net-0")`` returns a :class:`jaxcert.Model`
whose ``energy_fn(params, structure)`` is the SevenNet network written in JAX and whose
``params`` are the checkpoint's weights; forces and stress are JAX derivatives of the
energy, so the model jits, vmaps over padded batches and differentiates to any order.
Architecture, file format and measured agreement: ``docs/sevennet.md``.

The network (a NequIP-style E(3)-equivariant message-passing model; for SevenNet-0 five
interaction layers, node features 128x0e+64x1e+32x2e, l_max 2, cutoff 5 Å) is run as
the sequence of *operations* stored in the converted file, one per sevenn module:

* ``edge_embedding``: for every directed edge i ← j with displacement
  d = r_j + image − r_i (|d| < r_c), the radial embedding
  (2/r_c)·sin(c_n r)/r · f_cut(r) with trained c_n (8 Bessel functions; f_cut the XPLOR
  switch from 4.5 to 5.0 Å, or the p = 6 polynomial of l3i5) and the real spherical
  harmonics Y(d/|d|) up to l_max in e3nn's "component" normalisation;
* ``onehot``: the species (index of the checkpoint's type map) and, for a
  multi-fidelity model, the modality, as one-hot vectors;
* ``linear``: an equivariant linear map (e3nn's ``o3.Linear``): per pair of equal
  irreps, out_w = α Σ_u x_u W_uw with α = 1/√fan-in; a multi-fidelity layer first
  appends the modality one-hot to its scalar input;
* ``convolution``: the "uvu" tensor product of the neighbour's features x_j with Y(d)
  weighted per edge and channel by a radial MLP (e3nn ``FullyConnectedNet``: no bias,
  W/√fan-in, second-moment-normalised SiLU) of the embedding, each path scaled by its
  e3nn path weight and summed over the neighbours j of i, divided by a constant;
* ``add`` (the linear self-connection), ``gate`` (e3nn ``Gate``: SiLU on the scalars,
  SiLU gates multiplying the l > 0 features), ``rescale`` (per-species, or per
  modality and species, scale and shift of the atomic energy) and ``reduce`` (sum).

By default the edges are a flat list (receiver i, sender j, image vector) padded to a bucket
(:class:`jaxcert.core.neighbors.EdgeListSpec`, the graph every jaxcert network takes: matscipy's
O(N) list on the host at every size, reused inside a Verlet skin, a larger bucket on
overflow) and messages into atom i are a segment sum over the receivers.  With
``capacity=N`` instead, neighbours come from :func:`jaxcert.core.neighbors.pairs` (dense
images for small cells, the cell list for large ones) compacted to the N nearest slots per
atom and messages are summed over the slots; more than N neighbours within the cutoff
turn the energy into NaN, never a silently truncated sum.  Either way the choice of pairs
uses distances held constant under differentiation, so derivatives are exact.

The weights are read from a torch-free ``.npz`` (arrays plus a JSON config) that
:func:`jaxcert_bridges.convert.convert_sevennet` writes from the installed ``sevenn``
package; :func:`sevennet` converts on first use, in a subprocess, so this process never
imports torch.  sevenn is GPL-3.0: this module is an independent implementation of the
published architecture (facts of its behaviour, none of its code), and weights are
converted locally, never redistributed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.core.neighbors import EdgeListSpec, listed_edges, pairs
from jaxcert.core.structure import Structure

__all__ = ["sevennet", "from_spec", "load_converted", "converted_path", "weights_dir", "SevenNetUnavailable",
           "DEFAULT_CAPACITY", "DEFAULT_MAX_BATCH", "SHIPPED"]

#: Checkpoints shipped inside the sevenn wheel (converted on first use).
SHIPPED: tuple[str, ...] = ("7net-0", "7net-0_11July2024", "7net-0_22May2024", "7net-mf-0", "7net-l3i5")

#: Default graph: ``None``, a flat edge list sized from the structure.  An integer N keeps N neighbour slots per
#: atom instead (within 5 Å: fcc metals ~42, diamond carbon 92, 10 % compressed diamond ~126).
DEFAULT_CAPACITY: int | None = None
#: Geometries evaluated at once by default (:attr:`jaxcert.Model.max_batch`; docs/sevennet.md "Memory").
DEFAULT_MAX_BATCH = 32

_FORMAT = "jaxcert-sevennet"
_FORMAT_VERSION = 1


class SevenNetUnavailable(ImportError):
    """The converted weights are not present and cannot be made here (sevenn/torch or e3nn-jax missing)."""


# ------------------------------------------------------------------------------------------- weights file
def weights_dir() -> str:
    """Directory of converted weights: ``$JAXCERT_CACHE/sevennet`` or ``~/.cache/jaxcert/sevennet``."""
    root = os.environ.get("JAXCERT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "jaxcert")
    return os.path.join(root, "sevennet")


def converted_path(checkpoint: str) -> str:
    """The cache file for a shipped checkpoint name (a path-like name is reduced to its file stem)."""
    stem = os.path.splitext(os.path.basename(checkpoint))[0] if os.sep in checkpoint else checkpoint
    return os.path.join(weights_dir(), f"{stem}.npz")


def _convert_in_subprocess(checkpoint: str, path: str) -> None:
    """Run the bridges' converter in a fresh interpreter (torch never enters this process)."""
    missing = [m for m in ("jaxcert_bridges", "sevenn", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        raise SevenNetUnavailable(
            f"SevenNet weights for {checkpoint!r} are not converted yet ({path} does not exist) and the converter "
            f"needs {', '.join(missing)}: install them with `pip install torch==2.13.0` then "
            '`pip install -e "bridges[sevennet]" "torch==2.13.0"` (docs/install.md), or convert elsewhere with '
            f"`python -m jaxcert_bridges.convert sevennet:{checkpoint} -o FILE` and pass path=FILE"
        )
    cmd = [sys.executable, "-m", "jaxcert_bridges.convert", f"sevennet:{checkpoint}", "-o", path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(path):
        raise SevenNetUnavailable(f"converting SevenNet {checkpoint!r} failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")


def load_converted(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(config, arrays) of a converted file (``docs/sevennet.md`` "File format"); no torch, no pickle."""
    with np.load(path, allow_pickle=False) as z:
        config = json.loads(str(z["config"]))
        arrays = {k: np.asarray(z[k]) for k in z.files if k != "config"}
    if config.get("format") != _FORMAT or config.get("format_version") != _FORMAT_VERSION:
        raise ValueError(f"{path} is not a {_FORMAT} v{_FORMAT_VERSION} file "
                         f"(format {config.get('format')!r} v{config.get('format_version')!r}); convert it again")
    return config, arrays


# ------------------------------------------------------------------------------------------- building blocks
_ACTS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "silu": jax.nn.silu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "softplus": jax.nn.softplus,
    "relu": jax.nn.relu, "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "ssp": lambda x: jax.nn.softplus(x) - float(np.log(2.0)),
}


def _act(spec: dict[str, Any]) -> Callable[[jax.Array], jax.Array] | None:
    if spec["act"] is None:
        return None
    f, cst = _ACTS[spec["act"]], float(spec["cst"])
    return f if cst == 1.0 else (lambda x: f(x) * cst)


class _Irreps:
    """(mul, l, dim, offset) per entry of an e3nn irreps string, from e3nn-jax's parser."""

    def __init__(self, text: str) -> None:
        import e3nn_jax as e3nn

        self.entries: list[tuple[int, int, int, int]] = []
        off = 0
        for mul, ir in e3nn.Irreps(text):
            self.entries.append((int(mul), int(ir.l), int(ir.dim), off))
            off += int(mul) * int(ir.dim)
        self.dim = off

    def block(self, x: jax.Array, k: int) -> jax.Array:
        """Entry k of the last axis as (..., mul, 2l+1)."""
        mul, _, d, off = self.entries[k]
        return x[..., off:off + mul * d].reshape(*x.shape[:-1], mul, d)


def _cat(blocks: list[jax.Array], lead: tuple[int, ...]) -> jax.Array:
    return jnp.concatenate([b.reshape(*lead, -1) for b in blocks], axis=-1)


def _linear(op: dict[str, Any], W: jax.Array, x: jax.Array) -> jax.Array:
    """e3nn ``o3.Linear``: out[i_out] = Σ_ins path_weight · Σ_u x[i_in]_u W_uw, weights flat in instruction order."""
    ir_in, ir_out = _Irreps(op["irreps_in"]), _Irreps(op["irreps_out"])
    lead = x.shape[:-1]
    outs: list[jax.Array | None] = [None] * len(ir_out.entries)
    off = 0
    for i_in, i_out, pw in op["instructions"]:
        mi, mo = ir_in.entries[i_in][0], ir_out.entries[i_out][0]
        w = W[off:off + mi * mo].reshape(mi, mo)
        off += mi * mo
        y = pw * jnp.einsum("...ud,uw->...wd", ir_in.block(x, i_in), w)
        outs[i_out] = y if outs[i_out] is None else outs[i_out] + y
    blocks = [o if o is not None else jnp.zeros((*lead, m, d), x.dtype)
              for o, (m, _, d, _) in zip(outs, ir_out.entries, strict=True)]
    return _cat(blocks, lead)


def _cg(l1: int, l2: int, l3: int, dtype) -> jax.Array:
    import e3nn_jax as e3nn

    return jnp.asarray(np.asarray(e3nn.clebsch_gordan(l1, l2, l3)), dtype)


def _cutoff_fn(cfg: dict[str, Any], r: jax.Array) -> jax.Array:
    rc = cfg["r_cut"]
    if cfg["kind"] == "xplor":
        ron = cfg["r_on"]
        r2, ron2, rc2 = r * r, ron * ron, rc * rc
        return jnp.where(r < ron, 1.0, (rc2 - r2) ** 2 * (rc2 + 2 * r2 - 3 * ron2) / (rc2 - ron2) ** 3)
    if cfg["kind"] == "poly":
        p = cfg["p"]
        x = r / rc
        return (1 - (p + 1.0) * (p + 2.0) / 2.0 * x ** p + p * (p + 2.0) * x ** (p + 1.0)
                - p * (p + 1.0) / 2.0 * x ** (p + 2.0))
    raise ValueError(f"unknown cutoff function {cfg['kind']!r}")


def _edges(s: Structure, cutoff: float, capacity: int | None, flip: bool = False):
    """(dR, j, mask, receivers) of the directed edges i ← j within ``cutoff``.

    On a structure with an edge list: flat (E,) edges, ``receivers`` the atom i of each.  Otherwise rows
    (n, m) of at most ``capacity`` slots per atom and ``receivers`` None (messages summed over the slots).
    dR = r_j + image − r_i (the sender j's displacement from the receiver i); slots beyond the cutoff or
    not real are masked.  Compaction keeps the nearest slots (stop-gradient distances, so derivatives are
    exact); an atom with more than ``capacity`` neighbours within the cutoff, or an edge list that overflowed
    its bucket, makes dR (hence E) NaN.  ``flip`` reverses the edge vectors (only for the negative control in
    the tests).
    """
    if isinstance(s.neighbor_list, EdgeListSpec):
        e = listed_edges(s, cutoff)
        dR = jnp.stack(e.vectors, axis=-1)  # NaN on every real edge after an overflow
        return (-dR if flip else dR), e.senders, e.mask, e.receivers
    p = pairs(s, cutoff)
    dR, j = p.dR, p.j
    within = p.mask & (jax.lax.stop_gradient(p.r) < cutoff)
    m = within.shape[-1]
    if capacity is not None and capacity < m:
        key = jnp.where(within, jax.lax.stop_gradient(p.r), jnp.inf)
        _, idx = jax.lax.top_k(-key, capacity)
        overflow = jnp.any(jnp.sum(within, axis=-1) > capacity)
        dR = jnp.take_along_axis(dR, idx[..., None], axis=-2)
        dR = jnp.where(overflow, jnp.nan, dR)
        j = jnp.take_along_axis(j, idx, axis=-1)
        within = jnp.take_along_axis(within, idx, axis=-1)
    if flip:
        dR = -dR
    return dR, j, within, None


# ------------------------------------------------------------------------------------------- the network
def _energy(config: dict[str, Any], params: dict[str, jax.Array], s: Structure, *, modal_idx: int | None,
            capacity: int | None, type_table: np.ndarray, flip: bool = False, w3j: str = "float32") -> jax.Array:
    """SevenNet's total energy (eV): the operations of ``config`` run in order on a dict of arrays.  ``w3j`` is
    the precision of the W3j constants of the all-nonzero-l paths (:func:`sevennet`)."""
    dt = s.positions.dtype
    P = {k: (v.astype(dt) if jnp.issubdtype(v.dtype, jnp.floating) else v) for k, v in params.items()}
    n = s.n_atoms
    cutoff = float(config["cutoff"])
    dR, j, emask, rcv = _edges(s, cutoff, capacity, flip=flip)
    fmask = emask.astype(dt)
    safe = jnp.where(emask[..., None], dR, jnp.asarray([0.0, 0.0, 1.0], dt))
    r = jnp.sqrt(jnp.sum(safe * safe, axis=-1))
    data: dict[str, Any] = {"x": jnp.asarray(type_table)[s.numbers]}
    if modal_idx is not None:
        data["modal_type"] = jnp.asarray(modal_idx)
    ctx = {"r": r, "safe": safe, "j": j, "fmask": fmask, "mask": s.mask, "n": n, "dt": dt, "w3j": w3j, "rcv": rcv}
    for op in config["ops"]:
        _run_op(op, P, data, ctx)
    return data["inferred_total_energy"]


def _run_op(op: dict[str, Any], P: dict[str, jax.Array], data: dict[str, Any], ctx: dict[str, Any]) -> None:
    """Run one operation of the converted file on ``data`` (in place)."""
    import e3nn_jax as e3nn

    r, safe, j, fmask, dt, n = ctx["r"], ctx["safe"], ctx["j"], ctx["fmask"], ctx["dt"], ctx["n"]
    kind = op["op"]
    if kind == "edge_embedding":
        c = P[op["coeffs"]]
        basis = op["prefactor"] * jnp.sin(c * r[..., None]) / r[..., None]
        data[op["key_embedding"]] = basis * _cutoff_fn(op["cutoff"], r)[..., None]
        sh = e3nn.spherical_harmonics(op["sh_irreps"], safe, normalize=op["sh_normalize"],
                                      normalization=op["sh_normalization"])
        data[op["key_attr"]] = sh.array
    elif kind == "onehot":
        idx = data[op["key_in"]]
        data[op["key_out"]] = jax.nn.one_hot(idx, op["num_classes"], dtype=dt)
        if op.get("key_save"):
            data[op["key_save"]] = idx
        if op.get("key_additional"):
            data[op["key_additional"]] = data[op["key_out"]]
    elif kind == "linear":
        x = data[op["key_in"]]
        if op["num_modalities"] > 1:
            mod = jnp.broadcast_to(data[op["key_modal"]], (*x.shape[:-1], op["num_modalities"]))
            x = jnp.concatenate([x, mod.astype(dt)], axis=-1)
        data[op["key_out"]] = _linear(op, P[op["weight"]], x)
    elif kind == "add":
        data[op["key_out"]] = data[op["key_a"]] + data[op["key_b"]]
        if op["key_b"] == "self_cont_tmp":
            del data["self_cont_tmp"]
    elif kind == "convolution":
        data[op["key_x"]] = _convolution(op, P, data[op["key_x"]], data[op["key_filter"]],
                                         data[op["key_weight"]], j, fmask, ctx["w3j"], ctx["rcv"], n)
    elif kind == "gate":
        data[op["key"]] = _gate(op, data[op["key"]])
    elif kind == "rescale":
        e, sp = data[op["key_in"]], data[op["key_atom"]] if op["key_atom"] else None
        shift, scale = P[op["shift"]], P[op["scale"]]
        if op["modal_shift"]:
            shift = shift[data[op["key_modal"]]]
        if op["modal_scale"]:
            scale = scale[data[op["key_modal"]]]
        if sp is not None:
            shift = shift[sp] if shift.ndim else shift
            scale = scale[sp] if scale.ndim else scale
        data[op["key_out"]] = e * scale.reshape(-1, 1) + shift.reshape(-1, 1)
    elif kind == "reduce":
        e = data[op["key_in"]].reshape(n)
        data[op["key_out"]] = jnp.sum(jnp.where(ctx["mask"], e, 0.0)) * op["constant"]
    else:
        raise ValueError(f"unknown operation {kind!r} in the converted SevenNet file")



def _convolution(op: dict[str, Any], P: dict[str, jax.Array], x: jax.Array, Y: jax.Array, emb: jax.Array,
                 j: jax.Array, fmask: jax.Array, w3j: str, receivers: jax.Array | None = None,
                 n: int | None = None) -> jax.Array:
    """Σ_j Σ_paths w_e,u · path_weight · CG(x_j,u ⊗ Y_e) into each receiver i, over the denominator: a segment
    sum over ``receivers`` for flat edges, a sum over the slots of each row otherwise."""
    dt = x.dtype
    h = emb
    for layer in op["radial"]:
        W = P[layer["weight"]]
        act = _act(layer)
        if act is not None:
            h = act(h @ (W / (layer["h_in"] * layer["var_in"]) ** 0.5)) * layer["var_out"] ** 0.5
        else:
            h = h @ (W / (layer["h_in"] * layer["var_in"] / layer["var_out"]) ** 0.5)
    w_edge = h * fmask[..., None]  # masked slots carry no message
    ir1, iro = _Irreps(op["irreps_in1"]), _Irreps(op["irreps_out"])
    xj = x[j]  # (n, k, dim1): the sender's features
    lead = xj.shape[:-1]
    outs: list[jax.Array | None] = [None] * len(iro.entries)
    for i1, T, w_cols, pieces in _tp_plan(op, w3j):
        # all paths leaving input entry i1 in one contraction: z_euq = Σ_ij x_eui Y_ej T_ijq
        A = jnp.einsum("...j,ijq->...iq", Y, jnp.asarray(T, dt))
        z = jnp.einsum("...ui,...iq->...uq", ir1.block(xj, i1), A)
        wq = jnp.concatenate([jnp.broadcast_to(w_edge[..., c0:c0 + z.shape[-2], None], (*lead, z.shape[-2], d3))
                              for c0, d3 in w_cols], axis=-1)
        z = z * wq  # per-edge, per-channel path weight (mul2 = 1)
        for io, q0, d3 in pieces:
            y = z[..., q0:q0 + d3]
            outs[io] = y if outs[io] is None else outs[io] + y
    msg = _cat([o for o in outs], lead)  # every output entry of SevenNet's convolution has its own path
    if receivers is None:
        agg = jnp.sum(msg, axis=-2)  # messages into i: sum over its neighbour slots
    else:
        agg = jax.ops.segment_sum(msg, receivers, num_segments=n, indices_are_sorted=True)
    return agg / P[op["denominator"]].reshape(())


def _tp_plan(op: dict[str, Any], w3j: str = "float32"
             ) -> list[tuple[int, np.ndarray, list[tuple[int, int]], list[tuple[int, int, int]]]]:
    """Per input entry i1 of a "uvu" product: the stacked CG tensor T (d1, dim2, Q) of all its paths (path
    weights folded in), each path's first column in the per-edge weights and its width 2l+1, and where each
    path's Q-slice goes: (i_out, q0, 2l+1).  Static (numpy), built once per operation and W3j precision
    (``w3j``: "float32" as in the shipped models, or "float64"; :func:`sevennet`)."""
    W3J = np.dtype(w3j).type
    key = json.dumps([op["irreps_in1"], op["irreps_in2"], op["irreps_out"], op["instructions"],
                      op.get("unfolded_w3j", []), np.dtype(w3j).name])
    if key in _PLANS:
        return _PLANS[key]
    import e3nn_jax as e3nn

    ir1, ir2, iro = _Irreps(op["irreps_in1"]), _Irreps(op["irreps_in2"]), _Irreps(op["irreps_out"])
    unfolded = {tuple(u) for u in op.get("unfolded_w3j", [])}
    w_off, plan_by_i1 = 0, {}
    for i1, i2, io, pw in op["instructions"]:
        mu, l1, d1, _ = ir1.entries[i1]
        m2, l2, d2, off2 = ir2.entries[i2]
        _, l3, d3, _ = iro.entries[io]
        if m2 != 1:
            raise NotImplementedError("SevenNet convolutions take one copy of each spherical harmonic")
        cg = np.asarray(e3nn.clebsch_gordan(l1, l2, l3), np.float64)
        if l1 > 0 and l2 > 0 and l3 > 0 and (l1, l2, l3) in unfolded:
            cg = pw * cg.astype(W3J).astype(np.float64)  # float32 W3j buffer times the exact path weight
        elif l1 > 0 and l2 > 0 and l3 > 0:
            # e3nn's compiled tensor product holds path_weight·W3j for these paths as float32 constants
            # (folded in float32 when the shipped model was built; a float64 copy upcasts them); paths with an
            # l = 0 member use exact 1/√(2l+1) factors instead.  Same constants here, in both precisions.
            cg = (W3J(pw) * cg.astype(W3J)).astype(np.float64)
        else:
            cg = pw * cg
        plan_by_i1.setdefault(i1, []).append((off2, d2, io, d3, cg, np.arange(w_off, w_off + mu)))
        w_off += mu
    out = []
    for i1, paths in plan_by_i1.items():
        mu, _, d1, _ = ir1.entries[i1]
        Q = sum(p[3] for p in paths)
        T = np.zeros((d1, ir2.dim, Q))
        cols = []
        pieces, q = [], 0
        for off2, d2, io, d3, cg, wc in paths:
            T[:, off2:off2 + d2, q:q + d3] = cg
            cols.append((int(wc[0]), d3))
            pieces.append((io, q, d3))
            q += d3
        out.append((i1, T, cols, pieces))
    _PLANS[key] = out
    return out


_PLANS: dict[str, Any] = {}


def _activate(x: jax.Array, specs: list[dict]) -> list[jax.Array]:
    """Consecutive channel groups of ``x`` (``mul`` channels each), each through its activation (or none)."""
    out, off = [], 0
    for spec in specs:
        f = _act(spec)
        part = x[..., off:off + spec["mul"]]
        out.append(f(part) if f is not None else part)
        off += spec["mul"]
    return out


def _gate(op: dict[str, Any], x: jax.Array) -> jax.Array:
    """e3nn ``Gate``: act(scalars) ⊕ gated · act(gates), on the sorted input layout."""
    ir = _Irreps(op["irreps_in_sorted"])
    lead = x.shape[:-1]
    groups = [[ir.block(x, k) for k in ks] for ks in op["extract"]]
    scal_blocks, gate_blocks = groups[0], groups[1] if len(groups) > 1 else []
    gated_blocks = groups[2] if len(groups) > 2 else []
    sc = _cat(scal_blocks, lead)
    outs = _activate(sc, op["scalars"])
    if op["gates"]:
        g = _cat(gate_blocks, lead)
        g = jnp.concatenate(_activate(g, op["gates"]), axis=-1)
        gd = _Irreps(op["irreps_gated"])
        off = 0
        for k, (mul, l, _, _) in enumerate(gd.entries):
            coef = op["gated_path_weights"][k] * _cg(l, 0, l, x.dtype)[0, 0, 0]
            blk = _cat(gated_blocks, lead)
            yk = gd.block(blk, k) * g[..., off:off + mul, None] * coef
            outs.append(yk.reshape(*lead, -1))
            off += mul
    return jnp.concatenate(outs, axis=-1)


# ------------------------------------------------------------------------------------------- factory
def sevennet(checkpoint: str = "7net-0", modal: str | None = None, path: str | None = None,
             capacity: int | None = DEFAULT_CAPACITY, precision: str | None = None,
             max_batch: int | None = DEFAULT_MAX_BATCH, w3j: str = "float32", _flip_edges: bool = False) -> Model:
    """SevenNet as a native JAX :class:`jaxcert.Model` (``docs/sevennet.md``).

    Args:
      checkpoint: a checkpoint shipped in the sevenn wheel ("7net-0", "7net-mf-0", "7net-l3i5", ...).
      modal: the fidelity of a multi-fidelity model ("PBE" or "R2SCAN" for 7net-mf-0); required there.
      path: a converted ``.npz`` to load instead of the cache (``jaxcert_bridges.convert``).
      capacity: ``None`` (default): a flat edge list padded to a bucket, sized from each structure
        (:class:`jaxcert.core.neighbors.EdgeListSpec`); N: N neighbour slots per atom within the cutoff instead
        (static shape; overflow gives NaN).
      precision: "float32" or "float64" to evaluate the network in that precision whatever the dtype of
        the structure (inputs cast in, the energy cast back, so derivatives flow through the casts), or
        ``None`` (default) to follow the structure's dtype.  "float64" needs JAX's x64 mode.
      max_batch: geometries evaluated at once (:attr:`jaxcert.Model.max_batch`; :mod:`jaxcert.core.batching`).
        The default 32 bounds a probe program's working memory to about 1 GB on 13-atom clusters
        (about 27 MB per energy+forces evaluation in float32, from XLA's memory analysis); ``None`` lets
        whole probe batches run at once, which needs more than 24 GB for the default suite.
      w3j: the precision of the W3j constants of the paths whose l's are all non-zero.  "float32" (default)
        is the shipped model: e3nn folded them in float32, and float64 SevenNet keeps an equivariance floor
        from them.  "float64" computes them in float64, to measure what that floor costs
        (``benchmarks/board_precision.py --exact-w3j``; docs/sevennet.md "Constants"); such a model is not the
        shipped one, and its ``info`` says so (``w3j``).

    Raises:
      ValueError: an unknown ``modal``/``precision``/``w3j``, or "float64" without x64.
      SevenNetUnavailable: e3nn-jax is missing, or the weights are not converted and sevenn/torch are
        not installed to convert them (the message says what to install).
    """
    if precision not in (None, "float32", "float64"):
        raise ValueError(f"precision must be 'float32', 'float64' or None, got {precision!r}")
    if w3j not in ("float32", "float64"):
        raise ValueError(f"w3j must be 'float32' or 'float64', got {w3j!r}")
    if precision == "float64" and not jax.config.read("jax_enable_x64"):
        raise ValueError("precision float64 needs JAX's x64 mode (the CLI enables it with --dtype float64)")
    if importlib.util.find_spec("e3nn_jax") is None:
        raise SevenNetUnavailable('the native SevenNet needs e3nn-jax: pip install "jaxcert[e3nn]" '
                                  '(or pip install "e3nn-jax>=0.20")')
    if path is None:
        path = converted_path(checkpoint)
        if not os.path.isfile(path):
            _convert_in_subprocess(checkpoint, path)
    config, arrays = load_converted(path)
    modal_map = config.get("modal_map")
    modal_idx = None
    if modal_map:
        if modal is None:
            raise ValueError(f"SevenNet {checkpoint!r} is multi-fidelity: pass modal= one of {sorted(modal_map)}")
        if modal not in modal_map:
            raise ValueError(f"unknown modal {modal!r} for {checkpoint!r}; available: {sorted(modal_map)}")
        modal_idx = int(modal_map[modal])
    elif modal is not None:
        raise ValueError(f"SevenNet {checkpoint!r} has no modalities (got modal={modal!r})")
    type_map = {int(z): int(i) for z, i in config["type_map"].items()}
    table = np.zeros(max(119, max(type_map) + 1), np.int32)
    for z, i in type_map.items():
        table[z] = i
    params = {k: jnp.asarray(v) for k, v in arrays.items()}

    def energy_fn(prm: dict[str, jax.Array], s: Structure) -> jax.Array:
        out = s.positions.dtype
        if precision is not None:
            s = s.replace(positions=s.positions.astype(precision), cell=s.cell.astype(precision))
        E = _energy(config, prm, s, modal_idx=modal_idx, capacity=capacity, type_table=table, flip=_flip_edges,
                    w3j=w3j)
        return E.astype(out)

    src = config.get("source", {})
    info = (("architecture", "SevenNet (NequIP-style, e3nn-jax); docs/sevennet.md"),
            ("checkpoint", str(config["checkpoint"])), ("modal", str(modal)),
            ("source", f"{src.get('package')} {src.get('checkpoint_file')} sha256 {src.get('checkpoint_sha256')}"),
            ("weights", path), ("graph", "edge list" if capacity is None else f"{capacity} slots per atom"),
            ("precision", str(precision or "structure dtype")),
            ("parameters", str(config.get("n_parameters"))))
    if w3j != "float32":  # not the shipped model: say so (and key its programs apart)
        info += (("w3j", f"{w3j}, not the shipped float32 constants"),)
    if src.get("training_data"):  # what the checkpoint's config states (jaxcert_bridges.convert; model card)
        info += (("training_data", f"SevenNet checkpoint config: {src['training_data']}"),)
    name = (f"jax-sevennet-{checkpoint}" + (f"-{modal}" if modal else "") + (f"@{precision}" if precision else "")
            + ("+w3j-float64" if w3j != "float32" else ""))
    return Model(energy_fn, params=params, name=name, cutoff=float(config["cutoff"]),
                 elements=tuple(sorted(type_map)), info=info, max_batch=max_batch, edges=capacity is None)


def from_spec(args: str, options: list[str]) -> Model:
    """The CLI spec ``jax-sevennet:CHECKPOINT[:MODAL][@float32|@float64][,w3j-float64]``
    (``jaxcert.models.from_spec``).

    ``args`` is what follows ``jax-sevennet:`` ("7net-0", "7net-mf-0:PBE"; empty means "7net-0"),
    ``options`` the comma-separated words after ``@``: "float32" or "float64" (the network's precision),
    and "w3j-float64" (W3j constants in float64: not the shipped model), see :func:`sevennet`.
    docs/sevennet.md "Command line".

    Raises:
      ValueError: an unknown checkpoint, modal or option (the message lists the valid ones).
    """
    checkpoint, _, modal = args.partition(":")
    checkpoint = checkpoint or "7net-0"
    if checkpoint not in SHIPPED:
        raise ValueError(f"unknown SevenNet checkpoint {checkpoint!r}; shipped: {', '.join(SHIPPED)}")
    if ":" in modal:
        raise ValueError(f"too many ':' fields in jax-sevennet:{args}; expected CHECKPOINT[:MODAL]")
    precision, w3j = None, "float32"
    for o in options:
        if o == "w3j-float64":
            w3j = "float64"
            continue
        if o not in ("float32", "float64"):
            raise ValueError(f"unknown option {o!r} for jax-sevennet (float32, float64, w3j-float64)")
        if precision is not None and o != precision:
            raise ValueError(f"conflicting options {precision!r} and {o!r}")
        precision = o
    return sevennet(checkpoint, modal=modal or None, precision=precision, w3j=w3j)
