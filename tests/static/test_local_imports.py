"""`gpudoctor check script.py` sees what the project modules the script imports do, not only the script.

The false alarm this pins: the fault zoo's healthy baseline, checked alone, got a GD201 warning
("no autocast anywhere") for the bf16 autocast its ``_common.py`` helper applies. A helper adds what
its module-level code does and what the definitions the script takes from it do — nothing else — and
its own code is not judged.
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import REPO, check_findings

from gpudoctor.static.runner import run_checks

EXAMPLES = REPO / "examples"

TRAIN = '''\
import torch
{imports}

model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.AdamW(model.parameters(), fused=True)
for x, y in loader:
    with {context}:
        loss = model(x).sum()
    loss.backward()
    opt.step()
'''

HELPERS = '''\
import contextlib

import torch


def amp():
    return torch.autocast("cuda", dtype=torch.bfloat16)


def quiet():
    return contextlib.nullcontext()


def report(model, loader):
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        print(loss.item())
'''


def _codes(paths: list[Path]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in check_findings(paths):
        found.setdefault(f.code, set()).add(Path(f.location.path or "").name)
    return found


def _project(tmp_path: Path, imports: str, context: str) -> Path:
    (tmp_path / "helpers.py").write_text(HELPERS)
    script = tmp_path / "train.py"
    script.write_text(TRAIN.format(imports=imports, context=context))
    return script


def test_the_healthy_baseline_checked_alone_is_quiet_and_says_what_it_read() -> None:
    run = run_checks([str(EXAMPLES / "healthy.py")])
    assert [Path(p).name for p in run.context_files] == ["_common.py"]
    assert _codes([EXAMPLES / "healthy.py"]) == {}


def test_a_script_that_takes_other_helpers_keeps_its_finding() -> None:
    # tf32_off.py takes MLP, setup … from _common.py, not its bf16_autocast: it trains in fp32
    assert "GD201" in _codes([EXAMPLES / "tf32_off.py"])


def test_the_helper_the_script_takes_brings_its_autocast(tmp_path: Path) -> None:
    script = _project(tmp_path, "from helpers import amp", "amp()")
    codes = _codes([script])
    assert "GD201" not in codes
    assert "GD301" not in codes, "the helper's own loss.item() loop is not judged: it was not asked for"


def test_a_helper_beside_the_one_taken_brings_nothing(tmp_path: Path) -> None:
    script = _project(tmp_path, "from helpers import quiet", "quiet()")
    assert "GD201" in _codes([script])


def test_importing_the_whole_module_brings_all_it_does(tmp_path: Path) -> None:
    script = _project(tmp_path, "import helpers", "helpers.quiet()")
    assert "GD201" not in _codes([script])


def test_relative_imports_in_a_package_and_module_level_settings(tmp_path: Path) -> None:
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "setup_backends.py").write_text("import torch\n\ntorch.backends.cudnn.benchmark = True\n\n"
                                               "def nothing():\n    pass\n")
    (package / "engine.py").write_text("import torch\nfrom .setup_backends import nothing\n\n\n"
                                       "def build(model):\n    return torch.compile(model)\n")
    script = package / "main.py"
    script.write_text("import torch\nfrom .engine import build\n\n"
                      "model = build(torch.nn.Conv2d(3, 8, 3).cuda())\n"
                      "for x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n")
    run = run_checks([str(script)])
    assert sorted(Path(p).name for p in run.context_files) == ["engine.py", "setup_backends.py"]
    codes = _codes([script])
    assert "GD403" not in codes, "engine.build compiles the model"
    assert "GD208" not in codes, "setup_backends (imported by engine) turns the cuDNN autotuner on at import"


def test_cycles_and_installed_packages_end_the_search(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\nimport torch\nimport numpy\n")
    (tmp_path / "b.py").write_text("import a\nfrom torch import nn\n")
    run = run_checks([str(tmp_path / "a.py")])
    assert [Path(p).name for p in run.context_files] == ["b.py"]


FP32_SCRIPT = TRAIN.format(imports="import contextlib", context="contextlib.nullcontext()") + \
    '\n\nif __name__ == "__main__":\n    pass\n'
BF16_SCRIPT = TRAIN.format(imports="", context='torch.autocast("cuda", dtype=torch.bfloat16)')
ENGINE = '''\
import torch


def train_one_epoch(model, loader, opt):
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        opt.step()
'''


def test_one_script_of_a_tree_does_not_hide_another_s_finding(tmp_path: Path) -> None:
    (tmp_path / "fp32_example.py").write_text(FP32_SCRIPT)
    (tmp_path / "bf16_example.py").write_text(BF16_SCRIPT)
    codes = _codes([tmp_path])
    assert codes.get("GD201") == {"fp32_example.py"}
    message = next(f.message for f in check_findings([tmp_path]) if f.code == "GD201")
    assert "in this script or the project modules it imports" in message


def test_a_module_whose_loop_sits_in_a_function_is_judged_with_the_scripts_that_import_it(tmp_path: Path) -> None:
    # a script calls engine.train_one_epoch under autocast: the module is judged with that script's
    # program, whether the tree or the module alone is checked (the script beside it is read as context)
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "main.py").write_text('import torch\nfrom engine import train_one_epoch\n\n'
                                      'with torch.autocast("cuda", dtype=torch.bfloat16):\n'
                                      '    train_one_epoch(model.cuda(), loader, opt)\n')
    assert "GD201" not in _codes([tmp_path])
    assert "GD201" not in _codes([tmp_path / "engine.py"])
    # an unrelated script beside it that uses autocast does not count: it does not import the module
    (tmp_path / "main.py").write_text('import torch\n\nwith torch.autocast("cuda", dtype=torch.bfloat16):\n'
                                      '    pass\n')
    assert _codes([tmp_path]).get("GD201") == {"engine.py"}
    assert _codes([tmp_path / "engine.py"]).get("GD201") == {"engine.py"}
