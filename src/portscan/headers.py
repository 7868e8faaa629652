"""The project headers CUDA sources include: an extension's summary counts the findings
in them, and a scan reads them as CUDA (a ``.cu`` file's warp code often lives in a
``.cuh``/``.h`` beside it, and such a header need not say "cuda" anywhere). Also the
CUDA-looking names a project declares itself (gloo's ``cudaSum``), which are no CUDA API."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

#: ``#include "name"`` (angle-bracket includes name system and toolkit headers)
_QUOTED = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"\n]+)"', re.MULTILINE)


def quoted_includes(text: str) -> tuple[str, ...]:
    """The names of a source's ``#include "..."`` directives, in order."""
    return tuple(match["name"].strip() for match in _QUOTED.finditer(text))


def resolve_include(name: str, including: Path, dirs: Sequence[Path]) -> Path | None:
    """Where the compiler finds a quoted include: beside the including file first, then
    in the search directories (the extension's source directories and the declaring
    file's); None for a header outside the tree (a toolkit or torch header)."""
    for directory in (including.parent, *dirs):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def included_headers(sources: Sequence[Path], dirs: Sequence[Path], read: Callable[[Path], str | None],
                     limit: int = 500) -> list[Path]:
    """Every project header the sources include, directly or through other headers,
    once each and not one of the sources themselves; ``read`` gives a file's text
    (None: unreadable). ``limit`` bounds the walk on huge trees."""
    seen = {path.resolve() for path in sources}
    found: list[Path] = []
    queue = list(sources)
    while queue and len(found) < limit:
        current = queue.pop(0)
        text = read(current)
        if text is None:
            continue
        for name in quoted_includes(text):
            header = resolve_include(name, current, dirs)
            if header is None or header.resolve() in seen:
                continue
            seen.add(header.resolve())
            found.append(header)
            queue.append(header)
    return found


def cuda_headers(cuda_sources: Sequence[Path], read: Callable[[Path], str | None],
                 limit: int = 5000) -> frozenset[Path]:
    """The project headers (resolved paths) that ``.cu``/``.cuh`` sources include,
    directly or through other headers: they are compiled as part of a CUDA translation
    unit, so they are CUDA code whatever their suffix (``common_cuda.h`` holding only
    ``#define WARP_SIZE 32`` and ``#define FULL_MASK 0xffffffff``)."""
    return frozenset(h.resolve() for h in included_headers(cuda_sources, (), read, limit))


#: a CUDA runtime, driver or library API name (``cudaMalloc``, ``cuTensorMapEncodeTiled``,
#: ``cublasLtMatmul``, ``nvtxRangePushA``): the names the ``cuda-api`` kind looks up
CUDA_API_NAME = (r"(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|cublas(?:Lt)?[A-Z]\w*|curand[A-Z]\w*"
                 r"|cusparse(?:Lt)?[A-Z]\w*|cufft[A-Z]\w*|cusolver\w*|nvrtc[A-Z]\w*"
                 r"|cudnn[A-Z]\w*|nvtx[A-Z]\w*)")
#: a declaration or definition of a function or a variable whose name looks like CUDA's
#: (``int cudaNumDevices();``, ``template <typename T> void cudaSum(...)``,
#: ``std::vector<CudaMemory<T>> cudaSrcs;``, ``const char *cublasGetErrorString(...)``,
#: ``cublasOperation_t cuTransA =``): qualifiers and a type word, then the name; not a
#: statement that starts with a keyword (``return cudaFoo(...)``)
_DECLARED = re.compile(
    r"(?m)^[ \t]*(?:template\s*<[^;{}()]*>\s*)?"
    r"(?:(?:static|inline|extern|constexpr|virtual|__host__|__device__|__global__|__forceinline__"
    r"|const|volatile|unsigned|signed|struct|enum|class)\s+)*"
    r"(?!(?:return|else|case|delete|new|throw|goto|do|sizeof|co_return|co_await|using|typedef)\b)"
    r"[A-Za-z_][\w:]*(?:\s*<[^;{}()]*>)?[\s*&]+(" + CUDA_API_NAME + r")\s*[(;=\[{]")


def declared_cuda_names(texts: Iterable[str]) -> frozenset[str]:
    """The CUDA-API-like names (``cuda*``, ``cu*``, ``cublas*``, ...) the project's own C++
    declares or defines (functions, variables, members): its own, however CUDA-like they
    read."""
    return frozenset(name for text in texts if "cu" in text or "nvtx" in text for name in _DECLARED.findall(text))
