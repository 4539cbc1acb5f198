import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The suite compiles several thousand XLA programs; compilation is most of its time. Tests compile with the CPU
# backend's optimisation off (docs/architecture.md §4.3): user CPU time of the heaviest tests halves (measured
# 98 s -> 47 s on two defect-matrix cases), results stay IEEE (no fast math) and differ from the default flags
# only in the order of some floating-point operations. tests/test_default_compiler.py runs the clean LJ suite
# in a process with the default flags, so what users run stays tested. JAXCERT_TEST_DEFAULT_XLA=1 keeps the
# defaults for the whole suite.
# The flags were chosen and measured for XLA:CPU, so they are added only when the tests run on CPU (the default
# above; JAX_PLATFORMS=cuda runs them on a GPU with XLA's default flags, docs/install.md §6).
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
                      "--xla_llvm_disable_expensive_passes=true")
ON_CPU = os.environ["JAX_PLATFORMS"].split(",")[0].strip() == "cpu"
# Under pytest-xdist every worker (and every process it starts) runs XLA on one thread: the workers already fill the
# cores, and two workers each spreading small programs over every core slowed both (measured on three heavy
# files, 2 workers on 2 cores: 115.6 s -> 107.4 s wall, 180 -> 168 s user). torch in the bridge process likewise.
if ON_CPU and os.environ.get("PYTEST_XDIST_WORKER") and "xla_cpu_multi_thread_eigen" not in \
        os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1").strip()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
if ON_CPU and os.environ.get("JAXCERT_TEST_DEFAULT_XLA") != "1" and "xla_backend_optimization_level" not in \
        os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE_FLAGS}".strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# The CLI enables a persistent compilation cache in ~/.cache; tests stay hermetic without it (a per-session
# cache was measured to save nothing here: the suite's programs differ).
os.environ["JAXCERT_CACHE_DIR"] = "off"

import gc  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

#: Per-dtype tolerances used across the tests (round-off floors measured in the suite).
TOL = {jnp.float32: 2e-4, jnp.float64: 1e-10}


@pytest.fixture(params=[jnp.float32, jnp.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


#: Clear the compiled programs after a module once the process holds this many memory mappings (Linux's
#: ``vm.max_map_count`` is 65,530) or this much resident memory.
MAP_BUDGET = 20_000
RSS_BUDGET = 3 * 2**30


def _process_load() -> tuple[int, int]:
    """(memory mappings, resident bytes) of this process; (-1, -1) where /proc is not there."""
    try:
        with open("/proc/self/maps", "rb") as fh:
            maps = sum(1 for _ in fh)
        with open("/proc/self/status") as fh:
            rss = next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return -1, -1
    return maps, rss


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled XLA program after a test module once the process holds many of them.

    Each CPU executable holds a few memory mappings; one process running the whole suite accumulated about
    2,500 per minute and crossed Linux's ``vm.max_map_count`` (65,530) about 27 minutes in, where the next
    compilation segfaulted inside XLA (two CI runs, exit 139). Clearing the caches returns the mappings
    (measured: 1,401 -> 517 after 300 programs). Clearing after every module made later modules recompile the
    programs they share with earlier ones (the clean LJ probes above all), so the caches are cleared only past
    :data:`MAP_BUDGET` mappings or :data:`RSS_BUDGET` resident bytes, and always where /proc cannot tell.
    """
    yield
    maps, rss = _process_load()
    if maps < 0 or maps > MAP_BUDGET or rss > RSS_BUDGET:
        jax.clear_caches()
    gc.collect()


@pytest.fixture(autouse=True)
def _no_cache_left_on():
    """A test that switches the executable store on (the CLI run in-process with ``$JAXCERT_CACHE_DIR`` set to a
    temporary folder) leaves it off for the next test in the same worker.

    Left on, the store keys a user's model by tracing it (jaxcert/core/_model_key.py), so a later test that
    counts traces saw 48 instead of 26 in one CI run, depending on which files its worker had run before.
    """
    from jaxcert.core import cache

    saved = cache._STORE
    yield
    cache._STORE = saved


def pytest_ignore_collect(collection_path, config):
    """The torch-bridge tests run in their own process (tests/test_bridges.py), never beside the core suite.

    Two full runs with torch loaded in the same process as the core suite's hundreds of XLA compilations
    ended in a segmentation fault inside XLA's compiler (never reproduced in a short process); the bridges
    get a fresh process, and the core suite never imports torch.
    """
    path = str(collection_path).replace("\\", "/")
    if "/tests/bridges" in path and os.environ.get("JAXCERT_BRIDGE_PROCESS") != "1":
        return True
    return None


#: Seconds the heaviest test files took (one full run on two workers, 2-core CPU); every other file takes less.
FILE_SECONDS = {
    "tests/test_bridges.py": 121,
    "tests/test_adapters_mlip.py": 114,
    "tests/test_adapters_nequix.py": 94,
    "tests/test_verlet_loops.py": 80,
    "tests/test_cell_list.py": 49,
    "tests/test_gates_clean.py": 48,
    "tests/probes/test_stages.py": 38,
    "tests/test_docs_examples.py": 34,
    "tests/test_adapters_jax_md.py": 32,
    "tests/attacks/test_cli.py": 32,
    "tests/test_adaptive_sampling.py": 31,
    "tests/repair/test_repair.py": 31,
    "tests/detective/test_observables.py": 31,
    "tests/test_edge_lists.py": 30,
    "tests/test_cache.py": 27,
    "tests/test_board.py": 26,
    "tests/probes/test_defect_matrix.py": 24,
    "tests/test_batching.py": 24,
    "tests/test_default_compiler.py": 24,
    "tests/models/test_sevennet_native.py": 23,
    "tests/test_device_paths.py": 23,
    "tests/test_model.py": 23,
}


def pytest_configure(config):
    """Keep the order below: pytest-xdist's ``--dist loadfile`` otherwise sends the files with the most tests
    first (its ``loadscopereorder`` option) and the torch-bridge process, one test of about two minutes, last
    (measured with xdist's order: 1,099 s for the suite; with this one: 1,041 s and 1,007 s)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """The heaviest files are scheduled first (longest-processing-time order), the rest in collection order.

    With ``--dist loadfile`` each file goes whole to the next free worker in this order. Collected
    alphabetically, a heavy file near the end ran alone while the other worker sat idle: the torch-bridge
    process (tests/test_bridges.py) once made the last 4 minutes of a 21-minute run. Measured on the per-file
    times of one run, this order cuts the two workers' makespan from 891 s to 854 s.
    """
    items.sort(key=lambda item: -FILE_SECONDS.get(item.nodeid.split("::")[0], 0))
