"""Editing a report document in place for the tampered-report tests (tests/test_compare.py, tests/test_resume.py)."""

from typing import Any

DELETE = object()  # as a value: remove the key instead of setting it


def set_field(doc: Any, path: tuple, value: Any) -> None:
    """``doc[path[0]][path[1]]... = value``, or delete that key when ``value`` is :data:`DELETE`."""
    for k in path[:-1]:
        doc = doc[k]
    if value is DELETE:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value
