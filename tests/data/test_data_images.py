"""Path screening and image checks shared by every loader (crs.data.images)."""

from __future__ import annotations

import os

import pytest

from crs.data import DataError, safe_join
from crs.data.images import find_bad_images, load_image, resolve_paths, screen_images

from data_trees import truncate, write_image


@pytest.fixture
def tree(tmp_path):
    """root/a/b/x.jpg, root/a/y.png, root/inner -> root/a (symlink inside), root/out -> outside
    (symlink leading out), root/a/leak.jpg -> outside file."""
    root = tmp_path / "root"
    write_image(root / "a" / "b" / "x.jpg", seed=1)
    write_image(root / "a" / "y.png", seed=2, fmt="PNG")
    outside = tmp_path / "outside"
    write_image(outside / "secret.jpg", seed=3)
    os.symlink(root / "a", root / "inner")
    os.symlink(outside, root / "out")
    os.symlink(outside / "secret.jpg", root / "a" / "leak.jpg")
    return root


CASES = [
    "a/b/x.jpg", "a/./b//x.jpg", "a/b/../y.png", "inner/y.png", "inner/b/x.jpg", "a/missing.jpg",
    "../outside/secret.jpg", "/etc/passwd", "a/../../outside/secret.jpg", "out/secret.jpg", "a/leak.jpg",
    "inner/../a/y.png",
]


@pytest.mark.parametrize("relative", CASES)
def test_resolve_paths_agrees_with_safe_join(tree, relative):
    """The fast path gives safe_join's verdict: refused exactly when safe_join refuses, and the
    returned path names the same file."""
    try:
        expected = safe_join(tree, relative)
    except DataError:
        with pytest.raises(DataError, match="outside the data root"):
            resolve_paths(tree, [relative])
        return
    (cleaned,) = resolve_paths(tree, [relative])
    assert not cleaned.startswith("/") and ".." not in cleaned.split("/")
    assert (tree.resolve() / cleaned).resolve() == expected


def test_resolve_paths_refuses_empty_and_root_itself(tree):
    with pytest.raises(DataError, match="empty image path"):
        resolve_paths(tree, [""])
    with pytest.raises(DataError, match="data root itself"):
        resolve_paths(tree, ["a/.."])


def test_find_bad_images_and_screen(tree):
    truncate(tree / "a" / "b" / "x.jpg")
    paths = ["a/b/x.jpg", "a/y.png", "a/gone.jpg"]
    assert [(p.path, p.reason) for p in find_bad_images(tree, paths, "exists")] == [("a/gone.jpg", "missing")]
    decoded = find_bad_images(tree, paths, "decode")
    assert [(p.path, p.reason) for p in decoded] == [("a/b/x.jpg", "unreadable"), ("a/gone.jpg", "missing")]
    keep, skipped = screen_images(tree, paths, skip_bad=True)
    assert keep.tolist() == [False, True, False] and skipped[1] == "a/gone.jpg: missing"
    with pytest.raises(DataError, match=r"image missing: .*a/gone\.jpg; restore the files or load with skip_bad"):
        screen_images(tree, paths, skip_bad=False)
    with pytest.raises(DataError, match=r"unreadable or truncated: .*x\.jpg"):
        load_image(tree / "a" / "b" / "x.jpg", 8)
    with pytest.raises(DataError, match="verify='full'"):
        find_bad_images(tree, paths, "full")


def test_load_image_shape_from_grey_png(tree):
    write_image(tree / "g.png", seed=4, fmt="PNG", gray=True, size=20)
    image = load_image(tree / "g.png", 12)
    assert tuple(image.shape) == (3, 12, 12)
    assert (image[0] == image[1]).all() and (image[1] == image[2]).all()  # grey replicated to RGB
