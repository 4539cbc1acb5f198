r"""Convert a SevenNet checkpoint into a torch-free file for :mod:`jaxcert.models.sevennet`.

``convert_sevennet("7net-0", path)`` builds the model with the installed ``sevenn``
package (torch), walks its module sequence in order and writes every module as one
*operation* of a small, documented interpreter (``docs/sevennet.md`` "File format"):
the operation's kind, the data keys it reads and writes, its irreps, e3nn path weights
and normalisation constants (JSON), and its trained arrays (float32, as stored). One
``.npz`` file holds both: the arrays under ``"<op index>.<name>"`` and the JSON text
under ``"config"`` (a unicode array, so ``np.load(..., allow_pickle=False)`` reads it).
Nothing of sevenn's code goes into the file, only the checkpoint's numbers and the
architecture's constants (sevenn is GPL-3.0; the weights stay on the user's machine:
they are converted at run time into a cache directory, never redistributed).

Command line (no jaxcert import needed on the torch side)::

    python -m jaxcert_bridges.convert sevennet:7net-0 -o ~/.cache/jaxcert/sevennet/7net-0.npz
    python -m jaxcert_bridges.convert sevennet:7net-mf-0 -o mf0.npz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import warnings
from typing import Any

import numpy as np

__all__ = ["convert_sevennet", "FORMAT", "FORMAT_VERSION", "main"]

#: The ``format`` field of every file this module writes.
FORMAT = "jaxcert-sevennet"
#: Bumped when the operation schema changes; the loader refuses other versions.
FORMAT_VERSION = 1


def _activation_name(f: Any) -> str:
    """Name of an elementwise torch activation (the interpreter implements these)."""
    import torch

    known = {
        torch.nn.functional.silu: "silu", torch.tanh: "tanh", torch.sigmoid: "sigmoid",
        torch.nn.functional.softplus: "softplus", torch.relu: "relu", torch.nn.functional.relu: "relu",
        torch.nn.functional.gelu: "gelu",
    }
    if f in known:
        return known[f]
    name = getattr(f, "__name__", None) or getattr(getattr(f, "original_name", None), "__str__", lambda: "")()
    if name in ("ShiftedSoftPlus",):
        return "ssp"
    if isinstance(f, torch.nn.SiLU):
        return "silu"
    if isinstance(f, torch.nn.Tanh):
        return "tanh"
    raise NotImplementedError(f"activation {f!r} has no JAX counterpart in jaxcert.models.sevennet")


def _norm_act(a: Any) -> dict[str, Any]:
    """An e3nn ``normalize2mom`` (or plain function) as {"act": name, "cst": multiplier}."""
    if a is None:
        return {"act": None, "cst": 1.0}
    if hasattr(a, "cst") and hasattr(a, "f"):  # e3nn.math.normalize2mom
        return {"act": _activation_name(a.f), "cst": 1.0 if a._is_id else float(a.cst)}
    return {"act": _activation_name(a), "cst": 1.0}


def _arr(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.ops: list[dict[str, Any]] = []
        self.model64: Any = None

    def add(self, name: str, t: Any) -> str:
        key = f"{len(self.ops)}.{name}"
        self.arrays[key] = _arr(t) if not isinstance(t, np.ndarray) else t
        return key

    def op(self, **fields: Any) -> None:
        self.ops.append(fields)


def _linear(w: _Writer, lin: Any) -> dict[str, Any]:
    """An e3nn ``o3.Linear`` (no internal bias in SevenNet): irreps, instructions and flat weight."""
    if lin.bias.numel() != 0:
        raise NotImplementedError("e3nn Linear with biases is not supported")
    ins = [[int(i.i_in), int(i.i_out), float(i.path_weight)] for i in lin.instructions]
    return {"irreps_in": str(lin.irreps_in), "irreps_out": str(lin.irreps_out), "instructions": ins,
            "weight": w.add("weight", lin.weight)}


def _module_op(w: _Writer, name: str, mod: Any) -> None:  # noqa: C901 - one branch per sevenn module type
    kind = type(mod).__name__
    if kind == "EdgeEmbedding":
        basis, cut, sph = mod.basis_function, mod.cutoff_function, mod.spherical
        if type(basis).__name__ != "BesselBasis":
            raise NotImplementedError(f"radial basis {type(basis).__name__}")
        cname = type(cut).__name__
        if cname == "XPLORCutoff":
            cfg = {"kind": "xplor", "r_on": float(cut.r_on), "r_cut": float(cut.r_cut)}
        elif cname == "PolynomialCutoff":
            cfg = {"kind": "poly", "p": float(cut.p), "r_cut": float(cut.cutoff_length)}
        else:
            raise NotImplementedError(f"cutoff function {cname}")
        s = sph.sph
        w.op(op="edge_embedding", name=name, coeffs=w.add("coeffs", basis.coeffs), prefactor=float(basis.prefactor),
             cutoff=cfg, sh_irreps=str(s.irreps_out), sh_normalize=bool(s.normalize),
             sh_normalization=str(s.normalization), key_embedding="edge_embedding", key_attr="edge_attr")
    elif kind == "OnehotEmbedding":
        w.op(op="onehot", name=name, num_classes=int(mod.num_classes), key_in=mod.key_x, key_out=mod.key_output,
             key_save=mod.key_save, key_additional=mod.key_additional_output)
    elif kind == "IrrepsLinear":
        w.op(op="linear", name=name, key_in=mod.key_input, key_out=mod.key_output,
             num_modalities=int(mod.num_modalities), key_modal=mod.key_modal_attr, **_linear(w, mod.linear))
    elif kind == "SelfConnectionLinearIntro":
        w.op(op="linear", name=name, key_in=mod.key_x, key_out="self_cont_tmp", num_modalities=0,
             key_modal=None, **_linear(w, mod.linear))
    elif kind == "SelfConnectionOutro":
        w.op(op="add", name=name, key_a=mod.key_x, key_b="self_cont_tmp", key_out=mod.key_x)
    elif kind == "IrrepsConvolution":
        if mod.is_parallel:
            raise NotImplementedError("parallel (LAMMPS) convolution")
        tp = mod.convolution
        ins = []
        for i in tp.instructions:
            if i.connection_mode != "uvu" or not i.has_weight:
                raise NotImplementedError(f"tensor-product path mode {i.connection_mode!r}")
            ins.append([int(i.i_in1), int(i.i_in2), int(i.i_out), float(i.path_weight)])
        radial = []
        for k, layer in enumerate(mod.weight_nn):
            radial.append({"weight": w.add(f"radial{k}", layer.weight), "h_in": int(layer.h_in),
                           "var_in": float(layer.var_in), "var_out": float(layer.var_out), **_norm_act(layer.act)})
        # e3nn's compiled product folds path_weight·W3j into float32 constants for most paths; those still
        # reading a W3j buffer multiply it by the (exact) path weight at run time.  Record which, so the JAX
        # side uses the same constants (they differ by float32 rounding; docs/sevennet.md "Constants").
        # The float32 model and its float64 copy (``deepcopy().double()``, the bridge's) fold differently; the
        # copy's choice is recorded (float32 agreement is insensitive to it, float64 agreement is not).
        tp64 = getattr(w.model64, "_modules", {}).get(name).convolution if w.model64 is not None else tp
        code = getattr(getattr(tp64, "_compiled_main_left_right", None), "code", "")
        pat = r"self\._w3j_(\d)_(\d)_(\d)"
        unfolded = sorted({tuple(int(x) for x in m.groups()) for m in re.finditer(pat, code)})
        w.op(op="convolution", name=name, unfolded_w3j=[list(u) for u in unfolded], key_x=mod.key_x,
             key_filter=mod.key_filter, key_weight=mod.key_weight_input,
             irreps_in1=str(tp.irreps_in1), irreps_in2=str(tp.irreps_in2), irreps_out=str(tp.irreps_out),
             instructions=ins, radial=radial, denominator=w.add("denominator", mod.denominator))
    elif kind == "EquivariantGate":
        g = mod.gate
        cut = [list(map(int, c)) for c in g.sc.cut.instructions]
        scal = [{"mul": int(mul), "ir": str(ir), **_norm_act(a)}
                for (mul, ir), a in zip(g.act_scalars.irreps_in, g.act_scalars.acts, strict=True)]
        gates = [{"mul": int(mul), "ir": str(ir), **_norm_act(a)}
                 for (mul, ir), a in zip(g.act_gates.irreps_in, g.act_gates.acts, strict=True)]
        mul_w = [float(i.path_weight) for i in g.mul.instructions] if len(g.irreps_gated) else []
        w.op(op="gate", name=name, key=mod.key_x, irreps_in_sorted=str(g.sc.cut.irreps_in), extract=cut,
             irreps_scalars=str(g.irreps_scalars), irreps_gates=str(g.irreps_gates),
             irreps_gated=str(g.irreps_gated), scalars=scal, gates=gates, gated_path_weights=mul_w)
    elif kind == "SpeciesWiseRescale":
        w.op(op="rescale", name=name, key_in=mod.key_input, key_out=mod.key_output, key_atom=mod.key_indices,
             key_modal=None, shift=w.add("shift", mod.shift), scale=w.add("scale", mod.scale),
             modal_shift=False, modal_scale=False)
    elif kind == "ModalWiseRescale":
        w.op(op="rescale", name=name, key_in=mod.key_input, key_out=mod.key_output, key_atom=mod.key_atom_indices,
             key_modal=mod.key_modal_indices, shift=w.add("shift", mod.shift), scale=w.add("scale", mod.scale),
             modal_shift=bool(mod.use_modal_wise_shift), modal_scale=bool(mod.use_modal_wise_scale))
    elif kind == "Rescale":
        w.op(op="rescale", name=name, key_in=mod.key_input, key_out=mod.key_output, key_atom=None, key_modal=None,
             shift=w.add("shift", mod.shift), scale=w.add("scale", mod.scale), modal_shift=False, modal_scale=False)
    elif kind == "AtomReduce":
        if mod.reduce != "sum":
            raise NotImplementedError(f"reduce {mod.reduce!r}")
        w.op(op="reduce", name=name, key_in=mod.key_input, key_out=mod.key_output, constant=float(mod.constant))
    elif kind in ("ForceStressOutputFromEdge", "ForceStressOutput", "ForceOutputFromEdge", "ForceOutput"):
        return  # forces and stress come from JAX autodiff of the energy
    else:
        raise NotImplementedError(f"sevenn module {name!r} of type {kind} is not supported by the converter")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def convert_sevennet(checkpoint: str = "7net-0", path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Convert a SevenNet checkpoint (a shipped name such as "7net-0", "7net-mf-0", "7net-l3i5", or a path).

    Args:
      checkpoint: what :class:`sevenn.calculator.SevenNetCalculator` accepts as its model argument.
      path: the ``.npz`` to write (atomically: a temporary file then a rename); ``None`` writes nothing.

    Returns:
      The JSON config (a dict) written into the file.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sevenn
        import sevenn.util as su
        from sevenn.calculator import SevenNetCalculator

        modal = None
        calc = None
        try:
            calc = SevenNetCalculator(checkpoint, device="cpu")
        except ValueError as err:  # multi-fidelity: a modal is required to build a calculator; take any
            if "modal" not in str(err):
                raise
            cp = su.load_checkpoint(checkpoint)
            modal = sorted(cp.config["_modal_map"])[0] if "_modal_map" in cp.config else None
            calc = SevenNetCalculator(checkpoint, modal=modal, device="cpu")
    model = calc.model.eval()
    try:
        ck_path = str(su.pretrained_name_to_path(checkpoint))
    except Exception:  # a path, not a shipped name
        ck_path = str(checkpoint)
    w = _Writer()
    import copy

    import torch

    w.model64 = copy.deepcopy(model).to(torch.float64).eval()
    for name, mod in model._modules.items():
        _module_op(w, name, mod)
    type_map = {int(z): int(i) for z, i in model.type_map.items()}
    modal_map = {str(k): int(v) for k, v in model.modal_map.items()} if model.modal_map else None
    config = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "architecture": "sevennet",
        "checkpoint": str(checkpoint), "cutoff": float(calc.cutoff), "type_map": type_map, "modal_map": modal_map,
        "ops": w.ops,
        "source": {"package": f"sevenn {sevenn.__version__}", "checkpoint_file": os.path.basename(ck_path),
                   "checkpoint_sha256": _sha256(ck_path) if os.path.isfile(ck_path) else None,
                   "torch_dtype": "float32", "license_note": "weights converted locally from the installed "
                   "sevenn package; not redistributed", "training_data": _training_data(checkpoint)},
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
    }
    if path is not None:
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}.npz"
        np.savez(tmp, config=np.array(json.dumps(config)), **w.arrays)
        os.replace(tmp, path)
    return config


def _training_data(checkpoint: str) -> str | None:
    """What the checkpoint's own config states about its training and validation sets (the dataset paths it
    was trained from), quoted for the model card (docs/board.md); ``None`` when it states none or cannot be
    read."""
    try:
        import sevenn.util as su

        config = su.load_checkpoint(checkpoint).config
    except Exception:  # noqa: BLE001 - optional metadata: the conversion does not depend on it
        return None
    said = {k: config[k] for k in ("load_dataset_path", "load_trainset_path", "load_validset_path")
            if config.get(k)}
    return "; ".join(f"{k} = {v}" for k, v in said.items()) or None


def main(argv: list[str] | None = None) -> int:
    """``python -m jaxcert_bridges.convert sevennet:NAME -o FILE``."""
    ap = argparse.ArgumentParser(prog="python -m jaxcert_bridges.convert", description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="sevennet:7net-0 | sevennet:7net-mf-0 | sevennet:7net-l3i5 | sevennet:PATH")
    ap.add_argument("-o", "--output", required=True, help="the .npz file to write")
    args = ap.parse_args(argv)
    head, _, rest = args.spec.partition(":")
    if head != "sevennet":
        ap.error(f"unknown model family {head!r} (supported: sevennet)")
    cfg = convert_sevennet(rest or "7net-0", args.output)
    print(f"wrote {args.output}: {cfg['checkpoint']} ({cfg['n_parameters']:,} parameters, "
          f"{len(cfg['ops'])} operations, cutoff {cfg['cutoff']} A)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

