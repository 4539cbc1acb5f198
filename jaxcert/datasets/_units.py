"""Parse tabulated quantities with units (``docs/datasets.md``, "Parsing values with units").

Tables in installed packages store moduli either as numbers with a separate unit table (pymatgen ≥ 2024:
``{"Bulk modulus": 170}`` plus ``"_unit": {"Bulk modulus": "GPa"}``) or as strings (older pymatgen:
``"170 GPa"``, ``"(liquid) 25 GPa"``, ``"no data GPa"``). :func:`parse_pressure` reads every one of these
forms into GPa and keeps a qualifier such as "liquid" as a note; a string it cannot read, or a unit it
does not know, raises ``ValueError`` (never a silent NaN).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

__all__ = ["Quantity", "parse_pressure", "PRESSURE_UNITS_GPA"]

#: Pressure units in GPa, matched case-sensitively ("Mbar" is 100 GPa, "mbar" 1e-13 GPa).
PRESSURE_UNITS_GPA: dict[str, float] = {
    "TPa": 1e3, "GPa": 1.0, "MPa": 1e-3, "kPa": 1e-6, "Pa": 1e-9,
    "Mbar": 1e2, "kbar": 1e-1, "bar": 1e-4, "mbar": 1e-13, "atm": 1.01325e-4,
    "N/m^2": 1e-9, "N m^-2": 1e-9, "N/m2": 1e-9,
}
# spellings whose lower case is unambiguous
_CASELESS = {"tpa": "TPa", "gpa": "GPa", "kpa": "kPa", "kbar": "kbar", "atm": "atm"}

_MISSING = {"", "no data", "nodata", "n/a", "na", "none", "null", "nan", "unknown", "-", "—", "?"}
_APPROX = re.compile(r"^(?:ca\.?|approx\.?|about|~|≈|<|>|≤|≥)\s*", re.IGNORECASE)
_PAREN = re.compile(r"\(([^()]*)\)")
_NUMBER = re.compile(
    r"^(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:\s*(?:x|×|\*)\s*10\s*(?:\^|\*\*|<sup>)\s*(?P<exp>[-+]?\d+)\s*(?:</sup>)?)?"
    r"\s*(?P<unit>\S.*)?$"
)


class Quantity(NamedTuple):
    """A parsed value in GPa (NaN when the table has no value) and any qualifier found ("liquid", "approx")."""

    value: float
    note: str = ""


def _unit_factor(unit: str, what: str) -> float:
    u = unit.strip()
    if u in PRESSURE_UNITS_GPA:
        return PRESSURE_UNITS_GPA[u]
    if u.lower() in _CASELESS:
        return PRESSURE_UNITS_GPA[_CASELESS[u.lower()]]
    raise ValueError(f"{what}: unknown pressure unit {unit!r}; known: {', '.join(PRESSURE_UNITS_GPA)}")


def parse_pressure(value: Any, unit: str | None = None, *, what: str = "value") -> Quantity:
    """``value`` (number, or string with or without a unit) in GPa.

    Args:
      value: a number, ``None``/NaN (missing), or a string such as ``"170 GPa"``, ``"1.7e2 GPa"``,
        ``"1.7 x 10^2 GPa"``, ``"(liquid) 25 GPa"``, ``"ca. 30 GPa"``, ``"no data GPa"``. Unicode minus
        signs are accepted.
      unit: the unit of a bare number (a separate unit table); a unit inside the string wins over it.
      what: a label for error messages (e.g. ``"Fe: Bulk modulus"``).

    Returns:
      :class:`Quantity` (value in GPa, NaN when missing; note: qualifiers found, comma-separated).

    Raises:
      ValueError: an unreadable string, an unknown unit, or a bare number without any unit.
    """
    if value is None:
        return Quantity(math.nan)
    if isinstance(value, bool):
        raise ValueError(f"{what}: a boolean is not a quantity ({value!r})")
    if isinstance(value, (int, float)):
        if math.isnan(float(value)):
            return Quantity(math.nan)
        if unit is None:
            raise ValueError(f"{what}: bare number {value!r} without a unit")
        return Quantity(float(value) * _unit_factor(unit, what))
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a number or a string, got {type(value).__name__}")
    text = value.replace("\u2212", "-").replace("\u00a0", " ").strip()
    notes = [m.strip() for m in _PAREN.findall(text) if m.strip()]
    text = _PAREN.sub(" ", text).strip()
    approx = _APPROX.match(text)
    if approx:
        notes.append("approx")
        text = text[approx.end():].strip()
    note = ", ".join(notes)
    low = text.lower()
    # "no data GPa", "None", "" -> missing (a unit after a missing marker is allowed)
    for marker in sorted(_MISSING, key=len, reverse=True):
        if low == marker or (marker and low.startswith(marker + " ") and " " not in low[len(marker) + 1:].strip()):
            return Quantity(math.nan, note)
    m = _NUMBER.match(text)
    if m is None:
        raise ValueError(f"{what}: cannot read a number from {value!r}")
    x = float(m.group("num"))
    if m.group("exp") is not None:
        x *= 10.0 ** int(m.group("exp"))
    u = m.group("unit") or unit
    if u is None:
        raise ValueError(f"{what}: {value!r} has no unit and none was given")
    return Quantity(x * _unit_factor(u, what), note)
