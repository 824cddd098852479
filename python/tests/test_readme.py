"""Every Python example of the README's "From Python" section runs verbatim, in order,
in one namespace, from
the repository root (as a reader who ran `pip install .` there would). A block that
uses a CUDA array runs only where a GPU and PyTorch are present."""

import os
import re

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def blocks():
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    text = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def gpu_torch():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def test_readme_has_python_examples():
    assert len(blocks()) >= 4


def test_readme_python_examples_run_verbatim(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    ns: dict = {"__name__": "__main__"}
    ran, skipped = 0, 0
    for i, code in enumerate(blocks()):
        if "cuda" in code and not gpu_torch():
            if os.environ.get("KESTREL_REQUIRE_GPU") == "1":
                pytest.fail("KESTREL_REQUIRE_GPU=1 but PyTorch with CUDA is not usable")
            skipped += 1
            continue
        try:
            exec(compile(code, f"README.md python block {i}", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - name the block that failed
            pytest.fail(f"README python block {i} failed: {type(e).__name__}: {e}\n{code}")
        ran += 1
    assert ran + skipped == len(blocks()) and ran >= 3
