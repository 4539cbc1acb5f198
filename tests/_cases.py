"""Shared test structures: one small periodic cell and one cluster per analytic model."""

import numpy as np
from ase.build import bulk
from ase.cluster import Icosahedron

import jaxcert

# model name -> (factory kwargs, element, lattice kind, lattice constant Å)
CASES = {
    "lj": ({}, "Si", "diamond", 5.43),
    "morse": ({"element": "Cu"}, "Cu", "fcc", 3.61),
    "emt": ({}, "Cu", "fcc", 3.61),
    "sw": ({}, "Si", "diamond", 5.431),
    "tersoff": ({}, "Si", "diamond", 5.432),
    "eam": ({}, "Cu", "fcc", 3.615),
}


def model_names():
    return [n for n in CASES if n in jaxcert.models.available()]


def build_model(name):
    kw, *_ = CASES[name]
    return jaxcert.models.get(name, **kw)


def crystal(name, dtype=np.float64, seed=0, rattle=0.04):
    _, el, kind, a = CASES[name]
    at = bulk(el, kind, a=a, cubic=True)
    at.rattle(rattle, seed=seed)
    return jaxcert.Structure.from_ase(at, dtype=dtype)


def cluster(name, dtype=np.float64, seed=0, rattle=0.05):
    _, el, kind, a = CASES[name]
    at = Icosahedron(el, noshells=2, latticeconstant=a if kind == "fcc" else 4.0)
    d = at.get_all_distances()
    d = d[d > 0].min()
    nn = a / np.sqrt(2) if kind == "fcc" else a * np.sqrt(3) / 4
    at.positions *= nn / d
    at.rattle(rattle, seed=seed)
    at.center(vacuum=8.0)
    return jaxcert.Structure.from_ase(at, dtype=dtype)
