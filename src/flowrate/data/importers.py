"""Importers: real data into flowrate's format, shaped for a problem's samples.

- A flat token file (``import_tokens``): a bare array of uint16 or uint32 token ids, as nanoGPT's
  prepare scripts write ``train.bin``. It is cut into consecutive, non-overlapping windows of the
  problem's sample length (seq_len + 1 for the decoder, whose targets are its inputs shifted by
  one; seq_len for the encoders); a trailing partial window is dropped.
- An image folder (``import_images``): one subfolder per class (classes are numbered in sorted
  order of their names), decoded with Pillow, the shorter side resized to the problem's image size
  and the centre cropped square (the usual evaluation transform), stored as 8-bit pixels. Files
  are written in a seeded random order, so that every shard mixes the classes (a loader shuffles
  within shards and windows, not across the whole dataset).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from flowrate.data.make import problem_about, problem_label, problem_spec
from flowrate.data.records import DatasetIndex
from flowrate.data.writer import DatasetWriter
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Problem
from flowrate.problems.sample import SampleField

if TYPE_CHECKING:
    from PIL import Image

TOKEN_FILE_DTYPES = ("uint16", "uint32")
# Tokens read, checked and written at once.
TOKEN_CHUNK = 2**22
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
# Images decoded before each write.
IMAGE_CHUNK = 64


def import_tokens(
    path: str | Path,
    directory: str | Path,
    problem: Problem,
    *,
    dtype: str = "uint16",
    shards: int = 8,
    on_progress: Callable[[int], None] | None = None,
) -> DatasetIndex:
    """Cut the token file at ``path`` into the problem's token windows and write them as a dataset."""
    spec = problem_spec(problem, "problem")
    label = problem_label(problem)
    if len(spec) != 1 or not spec[0].is_integer or len(spec[0].shape) != 1:
        described = ", ".join(f.describe() for f in spec)
        raise ConfigError(
            "problem", f"{label} takes {described}, not one window of token ids; choose a language problem"
        )
    field = spec[0]
    if dtype not in TOKEN_FILE_DTYPES:
        raise ConfigError("dtype", f"token files are {' or '.join(TOKEN_FILE_DTYPES)}, got {dtype!r}")
    source = Path(path)
    if not source.is_file():
        raise ConfigError("tokens", f"no such file {source}")
    itemsize = np.dtype(dtype).itemsize
    size = source.stat().st_size
    if size % itemsize:
        raise ConfigError(
            "dtype", f"{source} is {size} bytes, not a whole number of {dtype} tokens; is --dtype right?"
        )
    tokens = np.memmap(source, dtype=np.dtype(dtype).newbyteorder("<"), mode="r") if size else np.empty(0)
    length = field.shape[0]
    samples = len(tokens) // length
    if samples == 0:
        raise ConfigError(
            "tokens", f"{source} holds {len(tokens)} tokens, fewer than one sample of {length} for {label}"
        )
    origin = {
        "source": "tokens",
        "file": str(source.resolve()),
        "dtype": dtype,
        "tokens": len(tokens),
        "problem": problem_about(problem),
    }
    per_chunk = max(1, TOKEN_CHUNK // length)
    with DatasetWriter(directory, spec, samples, shards, origin) as writer:
        while writer.written < samples:
            first = writer.written
            count = min(per_chunk, samples - first)
            window = np.asarray(tokens[first * length : (first + count) * length]).reshape(count, length)
            _check_tokens(window, field, source, first * length, label)
            writer.write({field.name: window.astype(field.numpy_dtype, copy=False)})
            if on_progress is not None:
                on_progress(writer.written)
    return writer.finished()


def _check_tokens(window: np.ndarray, field: SampleField, source: Path, offset: int, label: str) -> None:
    if field.high is None or not len(window):
        return
    top = int(window.max())
    if top >= field.high:
        position = offset + int(np.argmax(window.reshape(-1) >= field.high))
        raise ConfigError(
            "tokens",
            f"{source} holds token id {int(window.reshape(-1)[position - offset])} at position {position}, "
            f"but {label} has a vocabulary of {field.high}; set --vocab-size {top + 1} or more",
        )


def import_images(
    folder: str | Path,
    directory: str | Path,
    problem: Problem,
    *,
    shards: int = 8,
    seed: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> DatasetIndex:
    """Decode an image folder (one subfolder per class) into the problem's images and labels."""
    from PIL import Image, UnidentifiedImageError

    spec = problem_spec(problem, "problem")
    label = problem_label(problem)
    fields = {f.name: f for f in spec}
    images, labels = fields.get("images"), fields.get("labels")
    if images is None or labels is None or len(fields) != 2 or images.dtype != "uint8":
        described = ", ".join(f.describe() for f in spec)
        raise ConfigError(
            "problem", f"{label} takes {described}, not 8-bit images and labels; choose an image problem"
        )
    mode, side, channels_first = _image_layout(images, label)
    classes, files = _class_files(Path(folder))
    if labels.high is not None and len(classes) > labels.high:
        raise ConfigError(
            "images",
            f"{folder} has {len(classes)} class folders, but {label} classifies {labels.high}; "
            "use a problem with more classes or fewer folders",
        )
    order = np.random.default_rng(seed).permutation(len(files))
    origin = {
        "source": "images",
        "folder": str(Path(folder).resolve()),
        "classes": classes,
        "seed": seed,
        "problem": problem_about(problem),
    }
    with DatasetWriter(directory, spec, len(files), shards, origin) as writer:
        for start in range(0, len(order), IMAGE_CHUNK):
            chosen = [files[i] for i in order[start : start + IMAGE_CHUNK]]
            pixels = np.empty((len(chosen), *images.shape), dtype=np.uint8)
            for row, (path, _) in enumerate(chosen):
                try:
                    with Image.open(path) as image:
                        decoded = _square(image.convert(mode), side, Image.Resampling.BILINEAR)
                except (UnidentifiedImageError, OSError, ValueError) as error:
                    raise FlowrateError(
                        f"cannot decode image {path}: {error}; remove or replace it"
                    ) from None
                array = np.asarray(decoded, dtype=np.uint8)
                pixels[row] = array.transpose(2, 0, 1) if channels_first else array.reshape(images.shape)
            classes_of = np.array([c for _, c in chosen], dtype=labels.numpy_dtype)
            writer.write({"images": pixels, "labels": classes_of})
            if on_progress is not None:
                on_progress(writer.written)
    return writer.finished()


def _image_layout(field: SampleField, label: str) -> tuple[str, int, bool]:
    """Pillow mode, side, and whether channels come first, for an images field of (3, S, S),
    (1, S, S) or (S·S,) (flattened grey, as fc_mnist takes)."""
    shape = field.shape
    if len(shape) == 3 and shape[0] in (1, 3) and shape[1] == shape[2]:
        return ("RGB" if shape[0] == 3 else "L"), shape[1], shape[0] == 3
    if len(shape) == 1 and math.isqrt(shape[0]) ** 2 == shape[0]:
        return "L", math.isqrt(shape[0]), False
    raise ConfigError("problem", f"{label} takes images of shape {shape}, which no image folder can fill")


def _class_files(folder: Path) -> tuple[list[str], list[tuple[Path, int]]]:
    if not folder.is_dir():
        raise ConfigError("images", f"no such folder {folder}")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ConfigError(
            "images",
            f"{folder} has no class subfolders: put each class's images in a folder of its own "
            f"({folder}/cat/1.png, {folder}/dog/2.png, …)",
        )
    files = [
        (path, label)
        for label, name in enumerate(classes)
        for path in sorted((folder / name).rglob("*"))
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file()
    ]
    if not files:
        suffixes = " ".join(sorted(IMAGE_SUFFIXES))
        raise ConfigError("images", f"the class folders of {folder} hold no images ({suffixes})")
    return classes, files


def _square(image: Image.Image, side: int, resample: Image.Resampling) -> Image.Image:
    """The shorter side resized to ``side``, then the centre ``side`` x ``side`` cropped."""
    width, height = image.size
    scale = side / min(width, height)
    resized = image.resize((max(side, round(width * scale)), max(side, round(height * scale))), resample)
    left = (resized.width - side) // 2
    top = (resized.height - side) // 2
    return resized.crop((left, top, left + side, top + side))
