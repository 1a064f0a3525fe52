"""OpenBLAS as a user of this CPU would run it, for the benchmarks' peers (PyTorch, numpy).

Debian's OpenBLAS 0.3.21 picks its kernels by CPU model at load time and does not recognise
newer CPUs (a Xeon with AVX-512 and AMX): it falls back to its Prescott (SSE3) kernels, several
times slower at fp32 matrix products than its AVX-512 (SkylakeX) ones. A user who notices sets
OPENBLAS_CORETYPE for the CPU; `peer_env` does the same from /proc/cpuinfo's flags.
OpenBLAS's own threads ignore torch.set_num_threads, so `peer_env` also gives it the thread count
the benchmark measures with, as torchrun's OMP_NUM_THREADS=1 does for each of its workers. A
variable the user has set is left as it is. Only the benchmarks call this: the tests run with
the environment they were given.

`loaded` asks the OpenBLAS in this process (loaded by torch or numpy) which core and how many
threads it actually runs, so that a benchmark prints what ran rather than what it asked for.
"""
import ctypes
import os

# The OpenBLAS core (OPENBLAS_CORETYPE) for the best vector extension the CPU has, best first.
CORE_BY_FLAG = (("avx512f", "SkylakeX"), ("avx2", "Haswell"), ("avx", "Sandybridge"),
                ("sse4_2", "Nehalem"))


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The first CPU's flags (empty where /proc/cpuinfo has none)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_amx_bf16():
    """Whether the CPU (and the kernel: it enables AMX's state) has AMX with bf16 tiles."""
    return "amx_bf16" in cpu_flags()


def peer_env(env, threads=None):
    """Sets OPENBLAS_CORETYPE (from the CPU flags) and OPENBLAS_NUM_THREADS (`threads`; None:
    OpenBLAS's own choice) in the environment dict `env` of the peers started after, where the
    user has not; returns a sentence saying where each came from."""
    said = []
    if env.get("OPENBLAS_CORETYPE"):
        said.append(f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} as the user set it")
    else:
        flags = cpu_flags()
        found = next(((flag, core) for flag, core in CORE_BY_FLAG if flag in flags), None)
        if found:
            env["OPENBLAS_CORETYPE"] = found[1]
            said.append(f"OPENBLAS_CORETYPE={found[1]} for the CPU flag {found[0]}")
        else:
            said.append("OPENBLAS_CORETYPE unset (no CPU flag of bench/openblas_core.py's table)")
    if env.get("OPENBLAS_NUM_THREADS"):
        said.append(f"OPENBLAS_NUM_THREADS={env['OPENBLAS_NUM_THREADS']} as the user set it")
    elif threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
        said.append(f"OPENBLAS_NUM_THREADS={threads} as the benchmark's threads")
    return "; ".join(said)


def loaded():
    """{"core", "threads", "config"} of the OpenBLAS loaded in this process, asked of OpenBLAS
    itself (call it after importing torch or numpy); None where no OpenBLAS is loaded."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if ".so" in line and "blas" in line.lower()}
    # libopenblas* first; Debian's libblas.so.3 of OpenBLAS exports the same functions.
    for path in sorted(paths, key=lambda p: "openblas" not in os.path.basename(p)):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            corename, config = lib.openblas_get_corename, lib.openblas_get_config
        except (OSError, AttributeError):
            continue
        corename.restype = config.restype = ctypes.c_char_p
        return {"core": corename().decode(), "threads": lib.openblas_get_num_threads(),
                "config": config().decode()}
    return None


def describe(info):
    """One line for a benchmark's output: the core and threads OpenBLAS ran with."""
    if info is None:
        return "Core: - (no OpenBLAS loaded: another BLAS)"
    version = info["config"].split()[1] if info["config"].startswith("OpenBLAS ") else "?"
    return f"Core: {info['core']} (OpenBLAS {version}, {info['threads']} thread(s))"
