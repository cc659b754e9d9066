"""GD102 from code alone does not warn on a DataLoader without workers over a dataset held in memory.

Such a dataset hands out a sample by indexing what it built once (``TensorDataset``, ``return
self.data[index]``): with ``num_workers=0`` a batch costs the collation alone, and workers would add
their start-up and pickling. A ``__getitem__`` that decodes or transforms is still an input pipeline.
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

HELD = '''\
import torch
from torch.utils.data import Dataset


class Held(Dataset):
    def __init__(self, n):
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(n)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        x, y = self.data[index]
        return x.float(), torch.as_tensor(y)


class Decoded(Dataset):
    def __init__(self, paths, transform):
        self.paths, self.transform = paths, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        from PIL import Image
        return self.transform(Image.open(self.paths[index]))
'''

TRAIN = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset
{imports}

model = torch.nn.Linear(20, 1).cuda()
{loader}
for x, y in loader:
    model(x.cuda()).sum().backward()
'''


def _gd102_lines(tmp_path: Path, loader: str, imports: str = "from helpers import Held, Decoded",
                 helpers_inline: bool = False) -> list[int]:
    script = tmp_path / "train.py"
    if helpers_inline:
        script.write_text(HELD + TRAIN.format(imports="", loader=loader))
    else:
        (tmp_path / "helpers.py").write_text(HELD)
        script.write_text(TRAIN.format(imports=imports, loader=loader))
    return [f.location.line or 0 for f in check_findings([script]) if f.code == "GD102"]


def test_a_tensor_dataset_made_in_the_call_is_held_in_memory(tmp_path: Path) -> None:
    assert _gd102_lines(tmp_path, "loader = DataLoader(TensorDataset(torch.rand(64, 20), torch.rand(64, 1)), batch_size=8)") == []


def test_a_class_of_the_same_file_that_only_indexes_is_held_in_memory(tmp_path: Path) -> None:
    assert _gd102_lines(tmp_path, "data = Held(64)\nloader = DataLoader(data, batch_size=8)", helpers_inline=True) == []


def test_a_class_imported_by_name_from_a_project_module_is_judged_by_its_getitem(tmp_path: Path) -> None:
    assert _gd102_lines(tmp_path, "loader = DataLoader(Held(64), batch_size=8)") == []
    assert _gd102_lines(tmp_path, "loader = DataLoader(Decoded([], None), batch_size=8)") != []


def test_a_dataset_that_decodes_or_is_not_known_still_warns(tmp_path: Path) -> None:
    assert _gd102_lines(tmp_path, "loader = DataLoader(Decoded([], None), batch_size=8)", helpers_inline=True) != []
    # reached through a parameter (pytorch/examples' DDP tutorial series): not followed, still a warning
    assert _gd102_lines(tmp_path, "def make(dataset):\n    return DataLoader(dataset, batch_size=8)\nloader = make(Held(64))",
                        helpers_inline=True) != []


def test_a_split_of_a_dataset_tokenized_up_front_is_held_in_memory(tmp_path: Path) -> None:
    # accelerate's / DeepSpeedExamples' no-trainer scripts: the split is bound to a name before the loader
    mapped = ("from datasets import load_dataset\nraw = load_dataset('glue', 'mrpc')\n"
              "tokenized = raw.map(lambda b: b, batched=True)\n")
    assert _gd102_lines(tmp_path, mapped + "train_set = tokenized['train']\nloader = DataLoader(train_set, batch_size=8)") == []
    # a split of the raw (untokenized) dataset is not known to be cheap: still a warning
    assert _gd102_lines(tmp_path, mapped + "train_set = raw['train']\nloader = DataLoader(train_set, batch_size=8)") != []


def test_gd105_over_a_dataset_held_in_memory_is_info(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(HELD + TRAIN.format(imports="", loader="loader = DataLoader(Held(64), batch_size=8, num_workers=2)"))
    assert [f.severity for f in check_findings([script]) if f.code == "GD105"] == ["info"]
    script.write_text(HELD + TRAIN.format(imports="", loader="loader = DataLoader(Decoded([], None), batch_size=8, num_workers=2)"))
    assert [f.severity for f in check_findings([script]) if f.code == "GD105"] == ["warning"]
