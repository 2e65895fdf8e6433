"""The catalog as shipped, and the loader's load-time checks on broken catalogs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nvcre.catalog import CatalogError, CategoryNotFound, TemplateData, load_catalog
from nvcre.catalog.loader import load_catalog_from
from nvcre.catalog.templating import TemplateError, Templates, mpi_args

SHIPPED = [
    "communication/nccl-all-gather",
    "communication/nccl-all-reduce",
    "communication/nccl-alltoall",
    "communication/nccl-loopback",
    "communication/nccl-loopback-nvswitch",
    "diagnostics/dcgm-level1",
    "diagnostics/dcgm-level2",
    "diagnostics/dcgm-level3",
    "diagnostics/dcgm-level4",
    "training/nemotron5-56b",
    "training/nemotron5-8b",
]


def test_shipped_entries_sorted_by_domain_then_variant() -> None:
    assert [entry.key for entry in load_catalog().list()] == SHIPPED


@pytest.mark.parametrize(
    ("key", "framework", "timeout", "min_gpus"),
    [
        ("communication/nccl-all-reduce", "mpi", "1h", 0),
        ("communication/nccl-loopback", "torch", "1h", 0),
        ("diagnostics/dcgm-level4", "torch", "2h", 0),
        ("diagnostics/dcgm-level3", "torch", "1h", 0),
        ("diagnostics/dcgm-level2", "torch", "1h", 0),
        ("diagnostics/dcgm-level1", "torch", "1h", 0),
        ("training/nemotron5-8b", "torch", "1h", 4),
        ("training/nemotron5-56b", "torch", "24h", 32),
    ],
)
def test_entry_meta(key: str, framework: str, timeout: str, min_gpus: int) -> None:
    entry = load_catalog().lookup(*key.split("/"))
    assert entry.meta.framework == framework
    assert entry.default_timeout("full-scale") == timeout
    assert entry.meta.min_gpus == min_gpus
    assert entry.meta.description
    assert entry.iterations == 1


def test_parallelism_uses_config_arch_then_default() -> None:
    entry = load_catalog().lookup("training", "nemotron5-8b")
    assert (entry.parallelism("h100").tp, entry.parallelism("h100").pp) == (2, 1)
    assert entry.parallelism("l40s").tp == 4
    assert entry.parallelism("gb300").tp == 1  # gb300 reads gb200's entry, which falls to default
    big = load_catalog().lookup("training", "nemotron5-56b")
    assert big.parallelism("gb200").tp == 4
    assert big.parallelism("h100").tp == 8


def test_unknown_category_lists_known_ones() -> None:
    with pytest.raises(CategoryNotFound) as info:
        load_catalog().lookup("communication", "nccl-bogus")
    assert str(info.value) == "unknown certification category: communication/nccl-bogus"
    assert info.value.known == SHIPPED


def test_zero_render_of_every_entry_is_a_workflow_spec() -> None:
    for entry in load_catalog().list():
        spec = entry.render(TemplateData(entry_name=entry.variant))
        assert set(spec) >= {"dependencies", "jobTemplate", "orchestration", "overrides"}


def _catalog(tmp_path: Path, entry: str, meta: str | None = None) -> Path:
    (tmp_path / "_lib").mkdir()
    (tmp_path / "_lib" / "frag.yaml").write_text("- {name: A, value: '{{ gpus_per_node }}'}\n")
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "one.yaml").write_text(entry)
    if meta is not None:
        (tmp_path / "demo" / "one").mkdir()
        (tmp_path / "demo" / "one" / "meta.yaml").write_text(meta)
    return tmp_path


GOOD = "jobTemplate: {}\norchestration:\n  iterations: 3\n"


def test_loader_reads_iterations_and_meta(tmp_path: Path) -> None:
    catalog = load_catalog_from(
        _catalog(tmp_path, GOOD, "minGPUs: 8\nparallelism: {default: {tp: 2, pp: 2}}\n")
    )
    (entry,) = catalog.list()
    assert (entry.key, entry.iterations, entry.meta.min_gpus) == ("demo/one", 3, 8)
    assert entry.parallelism("h100").pp == 2


def test_meta_files_and_lib_are_not_entries(tmp_path: Path) -> None:
    root = _catalog(tmp_path, GOOD, "minGPUs: 1\n")
    (root / "demo" / "one" / "extra.yaml").write_text("not: an entry\n")
    assert [e.key for e in load_catalog_from(root).list()] == ["demo/one"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jobTemplate: {{ broken\n", "compiling demo/one"),
        ("value: {{ no_such_field }}\n", "executing template demo/one"),
        ("deps: {{ lib('missing.yaml') }}\n", "executing template demo/one"),
        ("a: [unclosed\n", "parsing rendered demo/one"),
        ("- a list\n", "parsing rendered demo/one: not a mapping"),
    ],
)
def test_broken_entry_fails_at_load(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_catalog_from(_catalog(tmp_path, text))


def test_bad_meta_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"meta\.yaml"):
        load_catalog_from(_catalog(tmp_path, GOOD, "parallelism: {h100: 3}\n"))


def test_template_functions(tmp_path: Path) -> None:
    root = _catalog(tmp_path, GOOD)
    (root / "demo" / "one").mkdir()
    (root / "demo" / "one" / "raw.txt").write_text("{{ kept }}\n")
    (root / "demo" / "t.yaml").write_text(
        "env:\n{{ lib('frag.yaml') | indent(2) }}\n"
        "raw: {{ include_file('raw.txt') | quote }}\n"
        "missing: {{ include_file('nope.txt') | quote }}\n"
        "args:\n{{ lib('frag.yaml') | mpi_args | indent(2) }}\n"
    )
    data = TemplateData(gpus_per_node=8).context(entry_dir="demo/one")
    out = yaml.safe_load(Templates(root).render("demo/t.yaml", data))
    assert out == {
        "env": [{"name": "A", "value": "8"}],
        "raw": "{{ kept }}",
        "missing": "",
        "args": ["-x", "A=8"],
    }


def test_mpi_args_escapes_quotes_and_rejects_bad_items() -> None:
    text = "- {name: X, value: 'say \"hi\"'}\n"
    assert yaml.safe_load(mpi_args(text)) == ["-x", 'X=say "hi"']
    with pytest.raises(TemplateError):
        mpi_args("- {value: 1}\n")


def test_every_catalog_file_is_package_data() -> None:
    """A file the package-data globs miss would be absent from an installed nvcre."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "nvcre"
    ]
    package = root / "src" / "nvcre"
    files = [
        p.relative_to(package).as_posix() for p in (package / "catalog" / "entries").rglob("*") if p.is_file()
    ]
    missed = [
        f
        for f in files
        if "__pycache__" not in f
        and not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)
    ]
    assert files and missed == []
