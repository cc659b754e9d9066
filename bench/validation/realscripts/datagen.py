"""Synthetic inputs that the unmodified third-party scripts read from disk, generated at run time.

Why this exists: the scripts were written for ImageNet, WikiText-2 and OpenWebText, none of which can
be downloaded on the validation machine (no network) or committed here. Each generator writes the
layout the script expects, in a temporary folder, with sizes chosen by the caller:

- ``image_folder``: ``train/<class>/*.jpg`` and ``val/<class>/*.jpg`` (torchvision ``ImageFolder``);
  smooth colour fields plus noise, so a JPEG decodes at about the cost of a photograph.
- ``labelled_jpegs``: one flat folder of ``<label>_<n>.jpg`` (the Oxford-IIIT Pet layout that
  accelerate's ``cv_example.py`` reads), photograph-sized and of varying shapes.
- ``wikitext``: ``train.txt``, ``valid.txt``, ``test.txt`` of space-separated made-up words.
- ``token_bins``: nanoGPT's ``train.bin`` / ``val.bin`` (uint16 token ids).

numpy and Pillow are imported lazily: the harness itself needs neither when no scenario reads files.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
from pathlib import Path
from typing import Any


def _photo_like(rng: Any, width: int, height: int) -> Any:
    """A ``width``×``height`` RGB image: a smooth colour field plus noise (decodes like a photograph)."""
    import numpy as np
    from PIL import Image

    coarse = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    img = Image.fromarray(coarse).resize((width, height), Image.BILINEAR)
    pixels = np.asarray(img, dtype=np.int16) + rng.integers(-24, 25, size=(height, width, 3))
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def _write_jpegs(args: tuple[str, int, int, int]) -> int:
    """Write ``count`` JPEGs of ``size``×``size`` into ``folder`` (one worker's share)."""
    import numpy as np

    folder, count, size, seed = args
    rng = np.random.default_rng(seed)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        _photo_like(rng, size, size).save(out / f"img{i:05d}.jpg", quality=90)
    return count


def _write_labelled(args: tuple[str, str, int, int]) -> int:
    """Write ``count`` JPEGs named ``<label>_<n>.jpg`` into ``folder``, 300–500 px a side (one label)."""
    import numpy as np

    folder, label, count, seed = args
    rng = np.random.default_rng(seed)
    for i in range(count):
        width, height = (int(x) for x in rng.integers(300, 501, size=2))
        _photo_like(rng, width, height).save(Path(folder) / f"{label}_{i + 1}.jpg", quality=90)
    return count


def labelled_jpegs(folder: Path, labels: int, per_label: int, workers: int | None = None) -> Path:
    """``labels`` × ``per_label`` JPEGs named ``<label>_<n>.jpg`` in one folder; returns ``folder``."""
    if (folder / "done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(str(folder), f"breed{c:02d}", per_label, c + 1) for c in range(labels)]
    workers = workers or max(1, min(len(jobs), (os.cpu_count() or 2)))
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        written = sum(pool.map(_write_labelled, jobs))
    (folder / "done").write_text(f"{written}\n")
    return folder


def image_folder(root: Path, classes: int, train_per_class: int, val_per_class: int, size: int,
                 workers: int | None = None) -> Path:
    """An ImageFolder tree under ``root`` (``root/train``, ``root/val``); returns ``root``."""
    if (root / "done").exists():
        return root
    jobs: list[tuple[str, int, int, int]] = []
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for c in range(classes):
            jobs.append((str(root / split / f"class{c:03d}"), per_class, size, len(jobs) + 1))
    workers = workers or max(1, min(len(jobs), (os.cpu_count() or 2)))
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        written = sum(pool.map(_write_jpegs, jobs))
    (root / "done").write_text(f"{written}\n")
    return root


def wikitext(folder: Path, train_tokens: int, vocab: int = 8000, seed: int = 0) -> Path:
    """``train.txt``/``valid.txt``/``test.txt`` in WikiText-2's line-of-words layout; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    for name, tokens in (("train.txt", train_tokens), ("valid.txt", max(2000, train_tokens // 10)),
                         ("test.txt", max(2000, train_tokens // 10))):
        lines = []
        left = tokens
        while left > 0:
            n = min(left, rng.randint(8, 120))
            lines.append(" " + " ".join(rng.choices(words, k=n)) + " ")
            left -= n
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def token_bins(folder: Path, train_tokens: int, val_tokens: int, vocab: int = 50257, seed: int = 0) -> Path:
    """nanoGPT's ``train.bin`` and ``val.bin`` (uint16 ids below ``vocab``); returns ``folder``."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name, n in (("train.bin", train_tokens), ("val.bin", val_tokens)):
        rng.integers(0, vocab, size=n, dtype=np.uint16).tofile(folder / name)
    return folder
