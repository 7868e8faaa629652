"""``python -m portscan``."""

from portscan.cli import main

raise SystemExit(main())
