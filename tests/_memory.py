"""A device with as much free memory as a test says (docs/architecture.md "Memory"): replaces
:func:`jaxcert.core.device.available_bytes` and records what each compiled call needs and which calls
:func:`jaxcert.core.batching.check_fits` refused."""

from jaxcert.core import batching, device


def starve(monkeypatch, free: int) -> tuple[list[int], list[int]]:
    """Make ``free`` bytes available; returns (needs of every checked call, needs of the refused ones), filled
    as calls are made."""
    needs, refused = [], []
    real = batching.check_fits

    def spy(exe):
        needs.append(batching.needed_bytes(exe))
        try:
            real(exe)
        except batching.ProgramTooLarge:
            refused.append(needs[-1])
            raise

    monkeypatch.setattr(batching, "check_fits", spy)
    monkeypatch.setattr(device, "available_bytes", lambda dev=None: free)
    return needs, refused
