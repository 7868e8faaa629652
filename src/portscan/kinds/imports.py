"""The ``import`` kind: imports of a module or anything below it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list, is_at_or_below
from portscan.ruleset.prefilter import Token, import_anchor, segment_sets
from portscan.ruleset.table import PatternError, TableReader


@dataclass(frozen=True, slots=True)
class ImportPattern:
    """``import m``, ``import m.sub as x``, ``from m import n``, ``from p import m``."""

    kind: ClassVar[str] = "import"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"imports"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "module"})
    modules: tuple[str, ...]
    #: when the import is guarded (``try``/``except ImportError``), also report each
    #: attribute use of the names it binds, unless a condition on the name guards it
    uses: bool = False

    @classmethod
    def read(cls, r: TableReader) -> ImportPattern:
        uses = r.raw("uses", False)
        if uses is not None and not isinstance(uses, bool):
            raise PatternError(r.key("uses"), "expected true or false")
        return cls(modules=r.dotted("modules"), uses=bool(uses))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """The module's segments, and an import statement naming its package."""
        return tuple(segments | {import_anchor(module)}
                     for segments, module in zip(segment_sets(self.modules), self.modules, strict=True))

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return f"Imports of {code_list(self.modules)} or any module below them, however spelled " \
               "(`import m`, `import m.sub as x`, `from m import n`)."

    def covers(self, name: str) -> bool:
        """Is ``name`` one of the modules or below one (``apex.amp`` under ``apex``)?"""
        return any(is_at_or_below(name, module) for module in self.modules)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, ImportPattern]], surface: PythonSurface) -> None:
        """An import of a covered module, reported on the ``from`` module when the module
        itself is covered, else on the imported name; once per statement and rule."""
        for site in surface.imports:
            for rule, p in rules:
                if not p.covers(site.full):
                    continue
                if site.local is None:  # from x import *
                    surface.hit(rule, (id(site.statement), site.full), site.module_node, module=site.full)
                    continue
                if site.module_node is not None and p.covers(site.module):
                    surface.hit(rule, (id(site.statement), site.full), site.module_node, module=site.module)
                else:
                    surface.hit(rule, (id(site.statement), site.full), site.alias_node, module=site.full)
                if p.uses:
                    surface.want_uses(rule, site.statement, site.local, site.scope)
