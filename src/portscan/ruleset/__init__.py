"""Rules as data: the rule file's schema, its loading, and the prefilter it implies.

Modules, from the bottom up: :mod:`~portscan.ruleset.table` (strict TOML tables),
:mod:`~portscan.ruleset.prefilter` (tokens a file must contain),
:mod:`~portscan.ruleset.fixspec` (the ``[fix]`` table), :mod:`~portscan.ruleset.schema`
(:class:`Rule`, validated) and :mod:`~portscan.ruleset.loader` (rule folders and the
:class:`RuleSet`). Nothing here imports a matcher or the fixer; ``tests/test_layering.py``
keeps it so. This file imports nothing, so that the kinds (:mod:`portscan.kinds`) can
sit between the tables they read with and the rules that hold them.
"""
