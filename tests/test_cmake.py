"""CMake and Makefiles: the two file kinds, their readers, the ``cmake`` match kind, and
the CMake-built fixture repository, finding by finding."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path, PurePosixPath

import pytest

from portscan.filekinds import file_kind
from portscan.kinds import KINDS
from portscan.kinds.common import MANIFESTS
from portscan.match.cmake import cuda_genex_regions, read_cmake
from portscan.match.makefiles import braced, read_makefile, recipe_commands
from portscan.model import Severity
from portscan.ruleset.loader import RuleSet
from portscan.ruleset.schema import RuleFileError
from portscan.scan import scan_paths, scan_source

from conftest import REPO
from conftest import inline_rule as rule

FIXTURE = REPO / "fixtures" / "cmake-extension"

EXPECTED = [
    ("CMakeLists.txt", 2, "PS940"),      # project(rope_ext LANGUAGES CXX CUDA)
    ("CMakeLists.txt", 4, "PS947"),      # option(ROPE_WITH_CUDA ...), info
    ("CMakeLists.txt", 13, "PS941"),     # find_package(CUDAToolkit REQUIRED)
    ("CMakeLists.txt", 22, "PS945"),     # csrc/rope_kernel.cu in add_library, on its own line
    ("CMakeLists.txt", 26, "PS942"),     # CUDA::cudart
    ("CMakeLists.txt", 26, "PS942"),     # CUDA::cublas
    ("CMakeLists.txt", 29, "PS943"),     # CUDA_ARCHITECTURES property
    ("Makefile", 4, "PS948"),            # -Xcompiler in NVCCFLAGS, reported where it is set
    ("Makefile", 15, "PS407"),           # $(NVCC) runs nvcc
    ("Makefile", 21, "PS802"),           # pip install --extra-index-url .../cu121
    # Makefile 22, `pip install flash-attn --no-build-isolation`, builds against the torch
    # that line 21 installs: the source build is the ROCm recipe, the cu121 index the finding
    ("Makefile", 28, "PS949"),           # cmake -DCMAKE_CUDA_ARCHITECTURES="80;90"
    ("Makefile", 32, "PS950"),           # git clone https://github.com/NVIDIA/cutlass.git
    ("cmake/cuda.cmake", 7, "PS944"),    # --use_fast_math
    ("cmake/cuda.cmake", 8, "PS944"),    # --expt-relaxed-constexpr
    ("cmake/cuda.cmake", 9, "PS944"),    # -lineinfo
    ("cmake/cuda.cmake", 10, "PS944"),   # -Xcompiler=-fno-gnu-unique
]




def run(path: str, source: str, *rules):
    findings = scan_source(textwrap.dedent(source), path, RuleSet(rules))
    return [(f.rule, f.span.line, f.span.column, f.message) for f in findings]


# ------------------------------------------------------------------ the fixture


def test_fixture_findings_line_by_line(rules) -> None:
    result = scan_paths([FIXTURE], rules)
    assert not result.errors
    assert [(f.path, f.span.line, f.rule) for f in result.findings] == EXPECTED


def test_fixture_positions_point_at_the_argument(rules) -> None:
    found = {(f.path, f.rule, f.span.line): f for f in scan_paths([FIXTURE], rules).findings}
    language = found[("CMakeLists.txt", "PS940", 2)]
    assert (language.span.column, language.message.startswith("CMake enables")) == (32, True)
    flag = found[("Makefile", "PS948", 4)]
    assert flag.span.column == 29 and "`-Xcompiler`" in flag.message
    assert found[("CMakeLists.txt", "PS947", 4)].severity is Severity.INFO


# ------------------------------------------------------------------ file kinds


@pytest.mark.parametrize(("path", "kind"), [
    ("CMakeLists.txt", "cmake"), ("csrc/CMakeLists.txt", "cmake"), ("cmake/Cuda.cmake", "cmake"),
    ("cmake/Modules/FindCUDNN.cmake", "cmake"), ("CMakeLists.txt.in", None),
    ("torch/share/cmake/Caffe2/public/cuda.cmake", None), ("lib/cmake/hip/hip-config.cmake", None),
    ("cmake/FooConfig.cmake", None), ("cmake/config.cmake", "cmake"), ("foo-config-version.cmake", None),
    ("cmake/FooTargets-release.cmake", None), ("cmake/config.cmake.in", None),
    ("Makefile", "makefile"), ("GNUmakefile", "makefile"), ("src/makefile", "makefile"),
    ("build/rules.mk", "makefile"), ("Makefile.am", None), ("makefiles.txt", None),
])
def test_which_paths_are_cmake_and_makefiles(path: str, kind: str | None) -> None:
    assert file_kind(PurePosixPath(path)) == kind


def test_every_kind_on_the_cmake_surface_reads_cmake_sources() -> None:
    from portscan.kinds.sites import CMakeKind

    readers = [pattern for pattern in KINDS.values() if "cmake" in pattern.surfaces]
    assert readers and all(issubclass(pattern, CMakeKind) for pattern in readers)


def test_the_worked_example_in_the_docs_is_the_real_entry() -> None:
    """docs/rule-format.md walks through adding the Makefile kind; keep it true."""
    docs = (REPO / "docs" / "rule-format.md").read_text()
    section = docs[docs.index("## Adding a file kind"):]
    entry = re.search(r"```python\n\s*(FileKind\(.*?\)),\n\s*```", section, re.DOTALL)
    assert entry is not None
    source = (REPO / "src" / "portscan" / "filekinds.py").read_text()
    assert entry.group(1) in source
    assert "match_makefile" in (REPO / "src" / "portscan" / "match" / "makefiles.py").read_text()
    for kind in ("command", "subprocess", "env", "requirement", "index"):
        assert "makefile" in KINDS[kind].surfaces, kind
    assert "makefile" in MANIFESTS


# ------------------------------------------------------------------ the CMake reader


def test_commands_arguments_and_offsets() -> None:
    text = ('# project(x CUDA)\nset(A "b c" [=[d]=] e\n    f)  # tail\n'
            '#[[ enable_language(CUDA)\n]]\nTarget_Link_Libraries(t $<$<BOOL:x>:CUDA::cublas>)\n')
    source = read_cmake(text)
    assert [c.name for c in source.commands] == ["set", "target_link_libraries"]
    args = source.commands[0].args
    assert [(a.text, a.quoted) for a in args] == [("A", False), ("b c", True), ("d", True),
                                                  ("e", False), ("f", False)]
    assert [text[a.start:a.start + len(a.text)] for a in args] == [a.text for a in args]
    assert "enable_language" not in source.code and "project" not in source.code
    assert len(source.code) == len(text)


@pytest.mark.parametrize("text", [
    "project(x CUDA", 'set(A "unclosed\n', "#[[ never closed\nproject(x CUDA)",
    "set(A [[x", ")))(((", "if(\n", "\x00\x01 (", "",
])
def test_malformed_cmake_is_read_best_effort(text: str, rules) -> None:
    read_cmake(text)
    scan_source(text, "CMakeLists.txt", rules)  # never raises


def test_nested_parentheses_stay_in_one_command() -> None:
    source = read_cmake("if((A AND B) OR C)\n  enable_language(CUDA)\nendif()\n")
    assert [c.name for c in source.commands] == ["if", "enable_language", "endif"]


def test_cuda_branch_of_a_rocm_aware_build_is_info(rules) -> None:
    source = """\
    project(ops LANGUAGES CXX)
    if(USE_ROCM)
      enable_language(HIP)
      find_package(hip REQUIRED)
    elseif(WITH_CUDA)
      enable_language(CUDA)
      find_package(CUDAToolkit REQUIRED)
    endif()
    enable_language(CUDA)
    """
    findings = scan_source(textwrap.dedent(source), "CMakeLists.txt", rules.select(["PS940", "PS941"]))
    assert [(f.rule, f.span.line, f.severity, f.guard) for f in findings] == [
        ("PS940", 6, Severity.INFO, "vendor-branch"),
        ("PS941", 7, Severity.INFO, "vendor-branch"),
        ("PS940", 9, Severity.ERROR, None),
    ]


def test_cuda_blocks_beside_rocm_blocks_are_info(rules) -> None:
    """Separate `if(WITH_CUDA)` and `if(WITH_ROCM)` groups: the build already chooses."""
    source = """\
    if(WITH_ROCM)
      enable_language(HIP)
    endif()
    if(WITH_CUDA)
      enable_language(CUDA)
    endif()
    """
    findings = scan_source(textwrap.dedent(source), "CMakeLists.txt", rules.select(["PS940"]))
    assert [(f.span.line, f.guard) for f in findings] == [(5, "vendor-branch")]
    alone = scan_source("if(WITH_CUDA)\n  enable_language(CUDA)\nendif()\n", "CMakeLists.txt",
                        rules.select(["PS940"]))
    assert [(f.span.line, f.guard) for f in alone] == [(2, None)]


def test_a_suppression_comment_works_in_cmake(tmp_path: Path, rules) -> None:
    (tmp_path / "CMakeLists.txt").write_text(
        "project(ops LANGUAGES CXX CUDA)  # portscan: ignore[PS940]\nenable_language(CUDA)\n")
    result = scan_paths([tmp_path], rules.select(["PS940"]))
    assert [(f.rule, f.span.line) for f in result.findings] == [("PS940", 2)]


# ------------------------------------------------------------------ the cmake kind


def test_regex_position_once_and_unless() -> None:
    first = rule("XX901", {"kind": "cmake", "commands": ["option"], "position": 0, "regex": "CUDA"})
    once = rule("XX902", {"kind": "cmake", "commands": ["ADD_LIBRARY"], "regex": r"\S+\.cu$", "once": True})
    bare = rule("XX903", {"kind": "cmake", "commands": ["cuda_add_library"]})
    unless = rule("XX904", {"kind": "cmake", "commands": ["add_library"], "regex": r"\S+\.cu$",
                            "unless": r"LANGUAGE\s+HIP"})
    source = """\
    option(WITH_CUDA "CUDA" ON)
    add_library(a x.cu
      y.cu)
    CUDA_ADD_LIBRARY(b z.cu)
    """
    assert run("CMakeLists.txt", source, first, once, bare, unless) == [
        ("XX901", 1, 13, "CUDA"), ("XX902", 2, 15, "x.cu"), ("XX904", 2, 15, "x.cu"),
        ("XX904", 3, 3, "y.cu"), ("XX903", 4, 1, "CUDA_ADD_LIBRARY")]
    ported = source + "set_source_files_properties(x.cu y.cu PROPERTIES LANGUAGE HIP)\n"
    assert [r[0] for r in run("CMakeLists.txt", ported, unless)] == []


@pytest.mark.parametrize(("match", "key"), [
    ({"commands": ["set"], "position": -1, "regex": "x"}, "match.position"),
    ({"commands": ["set"], "position": True, "regex": "x"}, "match.position"),
    ({"commands": ["set"], "once": True}, "match.regex"),
    ({"commands": ["set"], "once": "yes", "regex": "x"}, "match.once"),
    ({"commands": ["not a name"]}, "match.commands"),
    ({"commands": ["set"], "regex": "("}, "match.regex"),
    ({"commands": ["set"], "argument": "x"}, "match.argument"),
])
def test_bad_cmake_patterns_name_their_key(match: dict, key: str) -> None:
    with pytest.raises(RuleFileError) as error:
        rule("XX909", {"kind": "cmake", **match})
    assert error.value.key == key


# ------------------------------------------------------------------ the Makefile reader


NVCC = rule("XX910", {"kind": "subprocess", "programs": ["nvcc"]}, "${program}")
FLAGS = rule("XX911", {"kind": "command", "programs": ["nvcc"], "args": ["-gencode*", "-arch=*"]},
             "${arg}")
HOME = rule("XX912", {"kind": "env", "names": ["CUDA_HOME"]}, "${name}=${value}")
WHEEL = rule("XX913", {"kind": "requirement", "names": ["flash-attn"]}, "${package}")


def test_makefile_recipes_variables_and_exports() -> None:
    source = """\
    export CUDA_HOME = /usr/local/cuda
    NVCC ?= $(CUDA_HOME)/bin/nvcc
    ARCH = -gencode arch=compute_80,code=sm_80  # A100
    FLAGS = -O3 $(ARCH)

    all: ; @$(NVCC) $(FLAGS) -c k.cu
    %.o: %.cu
    \t-@$(NVCC) -arch=sm_90 -c $< \\
    \t    -o $@
    deps:
    \tcd third_party && pip install flash-attn && echo $$(nvcc --version)
    notarecipe:
    VAR = 1
    \tnvcc -gencode x  # a tab line outside any rule is not a recipe
    """
    assert run("Makefile", source, NVCC, FLAGS, HOME, WHEEL) == [
        ("XX912", 1, 8, "CUDA_HOME=/usr/local/cuda"),
        ("XX911", 3, 8, "-gencode"),
        ("XX910", 6, 9, "nvcc"),
        ("XX910", 8, 4, "nvcc"),
        ("XX911", 8, 12, "-arch=sm_90"),
        ("XX913", 11, 32, "flash-attn"),
        ("XX910", 11, 54, "nvcc"),  # `$$(nvcc ...)`: the shell's command substitution runs it
    ]


def test_make_references_become_braces_of_the_same_length() -> None:
    text = "$(NVCC) $(patsubst %.cu,%.o,$(SRCS)) $$(nproc) (x)"
    assert braced(text) == "${NVCC} ${patsubst %.cu,%.o,${SRCS}} $$(nproc) (x)"
    assert len(braced(text)) == len(text)


def test_recursive_variables_do_not_loop() -> None:
    source = "A = $(B)\nB = $(A) nvcc\nall:\n\t$(A) -c x.cu\n"
    assert len(list(recipe_commands(read_makefile(source)))) == 1  # expansion stops at a fixed depth


@pytest.mark.parametrize("text", ["all:\n\t$(\n", "\t\t\n:\n\t'unclosed\n", "x = $(y\n", "\\\n", ""])
def test_malformed_makefiles_are_read_best_effort(text: str, rules) -> None:
    scan_source(text, "Makefile", rules)


def test_flags_in_a_cuda_only_generator_expression_are_the_cuda_arm(rules) -> None:
    """`$<$<COMPILE_LANGUAGE:CUDA>:...>` gives its flags to nvcc compiles only: a HIP
    (or C++) build of the same sources never receives them (xLSTM's CMakeLists.txt)."""
    text = ("target_compile_options(ops PRIVATE\n"
            "    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>\n"
            '    "$<$<COMPILE_LANGUAGE:CUDA>:--use_fast_math;-res-usage>"\n'
            "    $<$<CUDA_COMPILER_ID:NVIDIA>:-lineinfo>\n"
            "    --expt-relaxed-constexpr)\n")
    findings = scan_source(text, "CMakeLists.txt", rules.select(["PS944"]))
    found = [(f.span.line, f.severity.value, f.guard) for f in findings]
    assert found == [(2, "info", "vendor-branch"), (3, "info", "vendor-branch"), (3, "info", "vendor-branch"),
                     (4, "info", "vendor-branch"), (5, "error", None)]
    assert cuda_genex_regions("$<$<COMPILE_LANGUAGE:CUDA>:$<$<CONFIG:Debug>:-G>> -O3") == [(0, 49)]
    assert cuda_genex_regions("$<$<COMPILE_LANGUAGE:CUDA>:-G") == []  # unclosed: no region
