"""portscan's accuracy on real code: fetch each corpus tree, scan it, score the labels.

    python benchmarks/accuracy/run.py [--git-trees DIR] [--cache DIR] [--only ID ...] [--no-write]

PyPI trees (an sdist pinned by version and sha256) are downloaded once into the cache
through the registry's JSON index (PEP 691); `pip download` is not used because it runs
the sdist's build backend, which is the scanned project's own code and fails for builds
that need torch or CUDA. Git trees are taken from ``--git-trees DIR``: for a tree of
``owner/name`` at commit C it looks for ``DIR/<tree id>/`` (an extracted tree), else a
clone or bare repository at ``DIR/owner+name/repo``, ``DIR/owner+name``,
``DIR/owner/name`` or ``DIR/name`` and extracts C from it; trees it cannot find are
listed as skipped. Each tree is scanned with ``portscan scan --format json --no-cache``
as a user runs it, and the tables are printed and written to benchmarks/ACCURACY.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from score import (CATEGORIES, CorpusError, Finding, Score, Tally, Tree, cuda_nearby,  # noqa: E402
                   drifted, precision, ratio, read_tree, score_tree)

PORTSCAN = str(Path(sys.executable).parent / "portscan")
INDEX = "https://pypi.org/simple/{name}/"


def fetch_pypi(tree: Tree, cache: Path) -> Path:
    """The extracted sdist of ``tree.spec``, downloaded and checked against its sha256 once."""
    root = cache / "trees" / tree.id
    if root.is_dir():
        return root
    name, _, version = tree.spec.partition("==")
    request = urllib.request.Request(INDEX.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - a fixed https index
        files = json.load(response)["files"]
    wanted = [f for f in files if f.get("hashes", {}).get("sha256") == tree.sha256]
    if not wanted:
        raise CorpusError(f"{tree.id}: no file of {tree.spec} on PyPI has sha256 {tree.sha256}")
    archive = cache / "sdists" / wanted[0]["filename"]
    if not archive.is_file():
        archive.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(wanted[0]["url"], timeout=300) as response:  # noqa: S310
            data = response.read()
        if hashlib.sha256(data).hexdigest() != tree.sha256:
            raise CorpusError(f"{tree.id}: {archive.name} does not match its sha256")
        archive.write_bytes(data)
    extract(archive, root)
    return root


def extract(archive: Path, root: Path) -> None:
    """Unpack an sdist with its single top folder stripped; members that would leave
    ``root`` (absolute paths, ``..``, links) are skipped."""
    scratch = root.with_name(root.name + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    data = archive.read_bytes()
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = [(m.filename, z.read(m)) for m in z.infolist() if not m.is_dir()]
    else:
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            members = [(m.name, t.extractfile(m).read()) for m in t.getmembers() if m.isfile()]
    for name, content in members:
        parts = Path(name).parts[1:]
        if not parts or Path(name).is_absolute() or ".." in parts:
            continue
        target = scratch.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    scratch.rename(root)


def find_git_tree(tree: Tree, folder: Path | None, cache: Path) -> Path | None:
    """An extracted tree for a git label set, or None when ``folder`` has no copy of it."""
    if folder is None:
        return None
    if (folder / tree.id).is_dir() and not is_git_dir(folder / tree.id):
        return folder / tree.id
    owner, name = tree.repo.split("/", 1)
    root = cache / "trees" / tree.id
    if root.is_dir():
        return root
    for candidate in (folder / f"{owner}+{name}" / "repo", folder / f"{owner}+{name}", folder / owner / name,
                      folder / name):
        git_dir = candidate / ".git" if (candidate / ".git").exists() else candidate
        if is_git_dir(git_dir):
            export(git_dir, tree.commit, root)
            return root
    return None


def is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def export(git_dir: Path, commit: str, root: Path) -> None:
    """Write the files of ``commit`` under ``root`` (blobs missing from a partial copy are skipped)."""
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.split(b"\0")
    entries = []
    for entry in filter(None, listing):
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":
            entries.append((sha, path.decode("utf-8", "surrogateescape")))
    scratch = root.with_name(root.name + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    batch = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                           input=b"".join(sha + b"\n" for sha, _ in entries), capture_output=True, check=True).stdout
    at = 0
    for _sha, path in entries:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        at = end + 1
        if len(header) != 3:  # "<sha> missing"
            continue
        size = int(header[2])
        target = scratch / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[at:at + size])
        at += size + 1
    scratch.rename(root)


def scan(root: Path) -> tuple[list[Finding], float]:
    """portscan's findings on a tree and the wall time of the scan."""
    start = time.perf_counter()
    done = subprocess.run([PORTSCAN, "scan", "--no-cache", "--format", "json", "."], cwd=root,
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise CorpusError(f"{root}: portscan failed ({done.returncode}): {done.stderr[-800:]}")
    report = json.loads(done.stdout)
    # a finding stands for its listed uses as well (one finding per import, its uses listed)
    found = [Finding(f["rule"], f["path"], line, f["severity"], use) for f in report["findings"]
             for line, use in [(f["line"], False), *((u["line"], True) for u in f.get("uses", ()))]]
    return found, elapsed


def line_count(root: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def table(title: str, rows: dict[str, Tally]) -> list[str]:
    out = [f"| {title} | true labels | recall (warning+) | recall (any) | recall (warning+), CUDA token nearby "
           "| traps | trap violations |",
           "|---|---|---|---|---|---|---|"]
    for name, t in rows.items():
        out.append(f"| {name} | {t.true} | {ratio(t.found, t.true)} | {ratio(t.found_any, t.true)} "
                   f"| {ratio(t.cuda_found, t.cuda_true)} ({t.cuda_found}/{t.cuda_true}) | {t.traps} "
                   f"| {t.violations} ({ratio(t.violations, t.traps)}) |")
    return out


#: figures to show beside today's (``[[column]]`` with ``label`` and a text per measure)
REFERENCE = HERE / "reference.toml"
MEASURES = {
    "recall": "recall, warning or above (true labels found)",
    "recall_any": "recall, any severity",
    "recall_cuda": "recall, warning or above, labels with a CUDA token nearby",
    "traps": "trap violations (warning or above on a trap)",
    "precision": "judged precision of warnings and errors (true / (true + false))",
    "precision_lines": "judged precision with each use line a finding lists counted as a finding too",
}


def headline(score: Score) -> dict[str, str]:
    """Today's figure per measure, as the tables print it."""
    t, v, u = score.total, score.verdicts, score.use_verdicts
    lines = v + u
    return {
        "recall": f"{ratio(t.found, t.true)} ({t.found}/{t.true})",
        "recall_any": f"{ratio(t.found_any, t.true)} ({t.found_any}/{t.true})",
        "recall_cuda": f"{ratio(t.cuda_found, t.cuda_true)} ({t.cuda_found}/{t.cuda_true})",
        "traps": f"{ratio(t.violations, t.traps)} ({t.violations}/{t.traps})",
        "precision": f"{precision(v)} ({v['true']} true, {v['false']} false, {v['debatable']} debatable; "
                     f"{len(score.unjudged)} not yet judged, {score.gone} judged ones no longer reported)",
        "precision_lines": f"{precision(lines)} ({lines['true']} true, {lines['false']} false, "
                           f"{lines['debatable']} debatable; use lines alone: {u['true']} true, {u['false']} false, "
                           f"{u['debatable']} debatable)",
    }


def headline_table(score: Score, reference: Path = REFERENCE) -> list[str]:
    """The headline measures, with the reference columns (figures before a piece of work,
    its targets) beside today's."""
    columns = tomllib.loads(reference.read_text(encoding="utf-8")).get("column", []) if reference.is_file() else []
    now = headline(score)
    out = ["| measure | value |" + "".join(f" {c['label']} |" for c in columns),
           "|---|---|" + "---|" * len(columns)]
    for key, title in MEASURES.items():
        out.append(f"| {title} | {now[key]} |" + "".join(f" {c.get(key, '-')} |" for c in columns))
    return out


def render(score: Score, trees: list[Tree], skipped: list[str], timings: list[tuple[str, float, int, int]],
           drift: list[str]) -> str:
    import portscan

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    labels = sum(len(tree.labels) for tree in trees)
    out = ["# Accuracy on real code", "",
           f"Measured {stamp} with portscan {portscan.__version__} on {platform.machine()}, Python "
           f"{platform.python_version()}: `python benchmarks/accuracy/run.py` "
           f"(corpus: benchmarks/accuracy/, {len(trees)} trees scored, {labels} labels). "
           "Before/after figures of past changes: [ACCURACY-HISTORY.md](ACCURACY-HISTORY.md).", "",
           *headline_table(score), ""]
    if skipped:
        out += [f"Skipped (tree not available; see the runner's `--git-trees`): {', '.join(skipped)}.", ""]
    if drift:
        out += ["Labels whose excerpt no longer matches (not scored):", *[f"- {d}" for d in drift], ""]
    out += ["## By category", "", *table("category", {c: score.by_category[c] for c in CATEGORIES
                                                      if c in score.by_category}), ""]
    out += ["## By project", "", *table("project", dict(sorted(score.by_project.items()))), ""]
    out += ["## Scan time and volume", "", "| tree | seconds | findings | per 1,000 lines |", "|---|---|---|---|"]
    out += [f"| {tid} | {secs:.1f} | {n} | {1000 * n / lines:.1f} |" for tid, secs, n, lines in timings]
    out += ["", "## Misses (true labels without a warning or error within ±3 lines)", ""]
    for label, nearby in score.misses:
        seen = ", ".join(f"{f.rule} {f.severity} at {f.line}" for f in nearby) or "nothing within ±10 lines"
        out.append(f"- `{label.tree}` {label.path}:{label.line} [{label.category}] {label.description} "
                   f"— portscan: {seen}")
    out += ["", "## Trap violations", ""]
    for label, warned in score.violations:
        out.append(f"- `{label.tree}` {label.path}:{label.line} [{label.category}] {label.description} "
                   f"— portscan: {', '.join(f'{f.rule} {f.severity} at {f.line}' for f in warned)}")
    if score.unjudged:
        counts = Counter(f"{tid} {f.rule}" for tid, f in score.unjudged)
        out += ["", "## Warnings and errors not yet judged (precision trees)", "",
                *[f"- {key}: {n}" for key, n in sorted(counts.items())]]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--git-trees", type=Path, metavar="DIR", help="where the git trees (or their repositories) are")
    parser.add_argument("--cache", type=Path, default=HERE / ".cache", metavar="DIR",
                        help="downloads and extracted trees (default: benchmarks/accuracy/.cache)")
    parser.add_argument("--only", nargs="*", metavar="ID", help="score only these trees")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/ACCURACY.md alone")
    args = parser.parse_args()
    trees = [read_tree(p) for p in sorted((HERE / "trees").glob("*.toml"))]
    if args.only:
        trees = [t for t in trees if t.id in args.only]
    score, scored, skipped, timings, drift = Score(), [], [], [], []
    for tree in trees:
        root = (fetch_pypi(tree, args.cache) if tree.source == "pypi"
                else find_git_tree(tree, args.git_trees, args.cache))
        if root is None:
            skipped.append(tree.id)
            continue
        problems = drifted(tree, root)
        drift += problems.values()
        kept = dataclasses.replace(tree, labels=tuple(x for x in tree.labels if x not in problems),
                                   judgements=tuple(x for x in tree.judgements if x not in problems))
        findings, seconds = scan(root)
        score_tree(kept, findings, {x: cuda_nearby(x, root) for x in kept.labels if x.kind == "true"}, score)
        timings.append((tree.id, seconds, len(findings), line_count(root)))
        scored.append(tree)
        print(f"scored {tree.id}: {len(findings)} findings in {seconds:.1f} s", file=sys.stderr)
    text = render(score, scored, skipped, timings, drift)
    print(text)
    if not args.no_write:
        (HERE.parent / "ACCURACY.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
