"""The ``kernel`` kind: a regular expression over CUDA/C++ kernel sources."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from portscan.bounded import Regex
from portscan.kinds.needles import Needle, needles, present
from portscan.kinds.sites import KernelSource, Span
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import PatternError, TableReader


@dataclass(frozen=True, slots=True)
class KernelPattern:
    """A regular expression over CUDA/C++ kernel sources (``.cu``, ``.cuh`` and the C++
    files an extension builds), with comments and string literals blanked out first."""

    kind: ClassVar[str] = "kernel"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cuda", "cpp"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    regex: Regex
    #: only in code compiled as CUDA (``.cu``/``.cuh`` and the headers they include), not in
    #: a plain C++ file that mentions CUDA: its inline ``asm`` is host (x86/Arm) assembly
    device_only: bool = False
    #: literal text one piece of which every match contains: a file without any is skipped
    needles: tuple[Needle, ...] = field(default=(), compare=False)

    @classmethod
    def read(cls, r: TableReader) -> KernelPattern:
        regex = r.regex("regex")
        if regex is None:
            raise PatternError(r.key("regex"), "missing required key")
        return cls(regex=regex, device_only=r.flag("device_only"), needles=needles(regex.pattern, regex.flags))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        where = ("`.cu`/`.cuh` files and the headers they include" if self.device_only
                 else "`.cu`/`.cuh` files and the C++ sources CUDA extensions build")
        return f"Kernel source text matching `{self.regex.pattern}` in {where}, with comments and strings ignored."

    def match_kernel(self, source: KernelSource) -> Iterator[Span]:
        if (self.device_only and not source.device) or not present(self.needles, source.code, source.lowered):
            return
        for match in self.regex.finditer(source.code):
            yield match.start(), match.end()
