"""The ``cuda-api`` kind: CUDA API identifiers that hipify does not map."""

from __future__ import annotations

import re

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from portscan.bounded import Regex
from portscan.headers import CUDA_API_NAME
from portscan.kinds.sites import KernelSource, Span
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader

_INCLUDE_LINE = re.compile(r"^[ \t]*#[ \t]*include\b[^\n]*", re.MULTILINE)

#: CUDA runtime, driver and library API identifiers (not macros) in kernel sources.
CUDA_API_IDENTIFIERS = rf"\b{CUDA_API_NAME}\b"


@dataclass(frozen=True, slots=True)
class CudaApiPattern:
    """CUDA API identifiers in kernel sources that PyTorch's hipify table does not map
    to HIP (the shipped copy of that table, ``portscan.match.hipify``)."""

    kind: ClassVar[str] = "cuda-api"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cuda", "cpp"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    identifiers: Regex = Regex(CUDA_API_IDENTIFIERS)

    @classmethod
    def read(cls, r: TableReader) -> CudaApiPattern:
        return cls(identifiers=r.regex("identifiers") or Regex(CUDA_API_IDENTIFIERS))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return ("CUDA API identifiers in kernel sources that PyTorch's hipify table "
                "(`torch.utils.hipify`) does not map to HIP.")

    def match_kernel(self, source: KernelSource) -> Iterator[Span]:
        """Each unmapped identifier once per file (the first use), none without a table."""
        if source.hipify is None:
            return
        defined = source.defined_macros()
        includes = [m.span() for m in _INCLUDE_LINE.finditer(source.code)]  # header paths, not API
        seen: set[str] = set()
        for match in self.identifiers.finditer(source.code):
            name = match.group(0)
            if any(a <= match.start() < b for a, b in includes):
                continue
            if name not in source.hipify and name not in defined and name not in seen:
                seen.add(name)
                yield match.start(), match.end()
