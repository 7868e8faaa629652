"""The shipped copy of PyTorch's hipify table: where it comes from, and that it is
the table of the torch release it names."""

from __future__ import annotations

import pytest

from portscan.match.hipify import (TABLE, installed_mappings, load_hipify_names, parse_table, render_table,
                              table_release)


def test_table_round_trips_identifiers_only() -> None:
    text = render_table({"cudaMalloc", "cub/util_type.cuh", "cub::CTA_SYNC", "CUBLAS_OP_N"}, "2.9.1+cu128")
    assert parse_table(text) == {"cudaMalloc", "CUBLAS_OP_N"}
    assert table_release(text) == "2.9.1"
    assert "https://github.com/pytorch/pytorch/blob/v2.9.1/torch/utils/hipify/cuda_to_hip_mappings.py" in text


def test_shipped_table_names_its_source_and_holds_the_common_runtime_api() -> None:
    text = TABLE.read_text(encoding="utf-8")
    assert table_release(text) is not None
    names = load_hipify_names()
    assert {"cudaMalloc", "cudaStreamSynchronize", "cublasSgemm", "curandCreateGenerator"} <= names
    assert "cudaLaunchKernelEx" not in names  # PS924's own bad example relies on this


def test_shipped_table_is_the_installed_torchs_when_the_releases_match() -> None:
    installed = installed_mappings()
    if installed is None:
        pytest.skip("torch is not installed: nothing to compare the shipped table with")
    names, version = installed
    shipped = TABLE.read_text(encoding="utf-8")
    if table_release(shipped) != version.split("+")[0]:
        pytest.skip(f"the table is from torch {table_release(shipped)}, torch {version} is installed")
    assert shipped == render_table(names, version), "regenerate: python -m portscan.match.hipify"
