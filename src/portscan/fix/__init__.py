"""``portscan fix``: rewrites declared by rules, applied with LibCST.

Stages: :mod:`~portscan.ruleset.fixspec` reads a rule's ``[fix]`` table;
:mod:`~portscan.fix.templates` (declarative) and :mod:`~portscan.fix.transforms`
(named, in Python) turn a match into an edit; :mod:`~portscan.fix.engine` loops one
file to a fixed point; :mod:`~portscan.fix.apply` reads and writes files safely.
"""
