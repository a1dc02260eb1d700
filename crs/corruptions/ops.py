"""Batched corruption operators on float32 images in [0, 1], shape (B, 3, H, W), any device.

Each operator takes the batch, its severity parameter and a :class:`Context` (ids, corruption name,
severity, spatial scale, grayscale flag) and returns the corrupted batch, clipped to [0, 1].
Definitions follow ImageNet-C (Hendrycks & Dietterich, ICLR 2019) and MedMNIST-C (Di Salvo et al.,
2024); ``docs/corruptions.md`` lists every formula and constant. Spatial parameters (blur radii,
hair width) are given at the 224 px reference side and multiplied by ``context.scale`` = side / 224.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

from crs.corruptions.context import Context
from crs.corruptions.lazy import functional as _functional
from crs.corruptions.levels import alias_table, sample, sample_impulse
from crs.corruptions.resample import box_resample
from crs.corruptions.seeding import bit_generator, generator, per_image
from crs.corruptions.uint8_ops import contrast_uint8, pixelate_uint8


# ---------------------------------------------------------------- random fields, one image at a time
def _noise_field(context: Context, draw) -> torch.Tensor:
    """Per-image draws of shape (C, H, W) (C = 1 for grayscale modalities), written into one batch.

    ``draw(shape, generator, out)`` fills ``out`` (one image's slice) from that image's generator.
    """
    channels = 1 if context.grayscale else 3
    shape = (channels, context.height, context.width)
    field = torch.empty((len(context.ids), *shape))
    for index, image_id in enumerate(context.ids):
        draw(shape, generator(image_id, context.name, context.severity, "noise"), field[index])
    return field.to(context.device)


def _normal(context: Context) -> torch.Tensor:
    return _noise_field(context, lambda shape, g, out: torch.randn(shape, generator=g, out=out))


def _layout(context: Context, draw) -> list[torch.Tensor]:
    """Per-image placement draws shared by all severities (see ``seeding``)."""
    return per_image(context.ids, context.name, None, "layout", draw)


# ---------------------------------------------------------------------------------------- noise
# Per-pixel noise on an image whose values are all whole 8-bit levels (every decoded image, uint8
# or float) is drawn from the exact 8-bit output distribution of the definition
# (``crs.corruptions.levels``): one alias-table look-up per pixel on one 32-bit random word. Other
# images (arbitrary floats, colour images of a grayscale modality) take the float definition. A
# uint8 batch and the same batch as floats / 255 give the same bytes; which path an image takes
# depends on its own values only, never on its batch mates.
def _whole_levels(x: torch.Tensor) -> list[bool]:
    """Per image: are all its values k / 255 for whole k?"""
    return ((x * 255).round_().div_(255) == x).flatten(1).all(dim=1).tolist()


def _sample_levels(levels: torch.Tensor, kind: str, parameter: float, context: Context) -> torch.Tensor:
    """8-bit noise on uint8 ``levels`` (B, C, H, W), one random stream per image, same device back."""
    if kind == "impulse":  # salt and pepper needs no table: 16 random bits per pixel
        draw = functools.partial(sample_impulse, amount=float(parameter))
    else:
        draw = functools.partial(sample, table=alias_table(kind, float(parameter)))
    host = levels.cpu().numpy()
    out = np.empty_like(host)
    for index, image_id in enumerate(context.ids):
        stream = bit_generator(image_id, context.name, context.severity, "noise")
        out[index] = draw(host[index], bit_generator=stream)
    return torch.from_numpy(out).to(levels.device)


def _level_noise(x: torch.Tensor, kind: str, parameter: float, context: Context, continuous) -> torch.Tensor:
    """Noise ``kind``: 8-bit sampling for whole-level images, ``continuous(x_rest, context_rest)`` for the rest."""
    independent_channels = x.shape[1] == 1 or not context.grayscale
    whole = _whole_levels(x) if independent_channels else [False] * len(x)

    def on_levels(y: torch.Tensor, part: Context) -> torch.Tensor:
        levels = (y * 255).round_().to(torch.uint8)
        return _sample_levels(levels, kind, parameter, part).to(y.dtype).div_(255)

    if all(whole):
        return on_levels(x, context)
    out = torch.empty_like(x)
    for ok in (True, False):
        rows = [i for i, flag in enumerate(whole) if flag == ok]
        if rows:
            index = torch.tensor(rows, device=x.device)
            part = replace(context, ids=[context.ids[i] for i in rows])
            out.index_copy_(0, index, (on_levels if ok else continuous)(x.index_select(0, index), part))
    return out


def level_noise_uint8(
    source: torch.Tensor, parameter: float, context: Context, kind: str
) -> torch.Tensor | None:
    """Noise ``kind`` straight on uint8 bytes (the bytes the float path gives); None for 3-channel
    images of a grayscale modality, whose noise is shared by the channels (float path)."""
    if context.grayscale and source.shape[1] != 1:
        return None
    return _sample_levels(source, kind, parameter, context)


def gaussian_noise(x: torch.Tensor, sigma: float, context: Context) -> torch.Tensor:
    """x + N(0, sigma^2) per pixel (ImageNet-C / MedMNIST-C gaussian_noise)."""
    return _level_noise(x, "gaussian", sigma, context, lambda y, c: (y + sigma * _normal(c)).clamp_(0, 1))


def shot_noise(x: torch.Tensor, photons: float, context: Context) -> torch.Tensor:
    """Poisson(x * photons) / photons: photon-counting noise (ImageNet-C shot_noise).

    Off the 8-bit levels, counts come from ``torch.poisson``; for the colour images of a grayscale
    modality the count is drawn once per pixel on the grey level and the same change is added to
    all three channels.
    """
    return _level_noise(x, "shot", photons, context, lambda y, c: _poisson_shot(y, photons, c))


def _poisson_shot(x: torch.Tensor, photons: float, context: Context) -> torch.Tensor:
    grey = x.mean(dim=1, keepdim=True) if context.grayscale else x
    counts = torch.empty_like(grey)
    for index, image_id in enumerate(context.ids):
        g = generator(image_id, context.name, context.severity, "noise")
        counts[index] = torch.poisson((grey[index] * photons).cpu(), generator=g).to(x.device)
    return (x + (counts / photons - grey)).clamp_(0, 1)


def impulse_noise(x: torch.Tensor, amount: float, context: Context) -> torch.Tensor:
    """Salt and pepper: a fraction ``amount`` of pixels set to 0 or 1 with equal odds (skimage s&p)."""
    return _level_noise(x, "impulse", amount, context, lambda y, c: _impulse_float(y, amount, c))


def _impulse_float(x: torch.Tensor, amount: float, context: Context) -> torch.Tensor:
    """Off-level images: one 32-bit word w per pixel flips it when w < amount * 2^32, and then makes
    it salt when w < amount * 2^31 (given a flip, w is uniform below the threshold: even odds)."""
    channels = 1 if context.grayscale else 3
    shape = (channels, context.height, context.width)
    pixels = channels * context.height * context.width
    flip_below, salt_below = np.uint32(amount * 2**32), np.uint32(amount * 2**31)
    words = np.stack(
        [
            bit_generator(image_id, context.name, context.severity, "noise")
            .random_raw((pixels + 1) // 2)
            .view(np.uint32)[:pixels]
            for image_id in context.ids
        ]
    ).reshape(len(context.ids), *shape)
    flipped = torch.from_numpy(words < flip_below).to(x.device).expand_as(x)
    salt = torch.from_numpy(words < salt_below).to(x.device, x.dtype).expand_as(x)
    return torch.where(flipped, salt, x)


def speckle_noise(x: torch.Tensor, sigma: float, context: Context) -> torch.Tensor:
    """x + x * N(0, sigma^2): multiplicative noise (ImageNet-C speckle_noise)."""
    return _level_noise(
        x, "speckle", sigma, context, lambda y, c: (y + y * (sigma * _normal(c))).clamp_(0, 1)
    )


# ----------------------------------------------------------------------------------------- blur
def _depthwise(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Convolve every channel with one 2-D kernel, reflect padding (OpenCV's default border)."""
    kernel = kernel.to(device=x.device, dtype=x.dtype)
    pad_y, pad_x = kernel.shape[0] // 2, kernel.shape[1] // 2
    mode = "reflect" if pad_y < x.shape[-2] and pad_x < x.shape[-1] else "replicate"
    padded = F.pad(x, (pad_x, pad_x, pad_y, pad_y), mode=mode)
    weight = kernel.expand(x.shape[1], 1, *kernel.shape)
    return F.conv2d(padded, weight, groups=x.shape[1])


def _gaussian_kernel_1d(sigma: float) -> torch.Tensor:
    radius = max(1, math.ceil(3 * sigma))
    t = torch.arange(-radius, radius + 1, dtype=torch.float64)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    return (k / k.sum()).float()


def _separable(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Convolve rows then columns with a symmetric 1-D kernel, reflect borders.

    Written as a weighted sum of shifted slices: on CPU this ran 17x faster than a grouped
    ``conv2d`` for 25 taps (PyTorch's depthwise CPU convolution is slow); on GPU both are cheap.
    """
    radius = len(kernel) // 2
    height, width = x.shape[-2:]
    mode = "reflect" if radius < min(height, width) else "replicate"
    weights = kernel.tolist()
    padded = F.pad(x, (radius, radius, 0, 0), mode=mode)
    rows = torch.zeros_like(x)
    for tap, weight in enumerate(weights):
        rows.add_(padded[..., tap : tap + width], alpha=weight)
    padded = F.pad(rows, (0, 0, radius, radius), mode=mode)
    out = torch.zeros_like(x)
    for tap, weight in enumerate(weights):
        out.add_(padded[..., tap : tap + height, :], alpha=weight)
    return out


def gaussian_blur(x: torch.Tensor, sigma: float, context: Context) -> torch.Tensor:
    """Separable Gaussian blur, sigma in px at 224, kernel truncated at 3 sigma, reflect borders.

    ImageNet-C gaussian_blur (skimage ``gaussian``, which truncates at 4 sigma; the tail beyond 3
    sigma holds 0.3 % of the weight).
    """
    return _separable(x, _gaussian_kernel_1d(sigma * context.scale)).clamp_(0, 1)


def disk_kernel(radius: float, alias_sigma: float) -> torch.Tensor:
    """ImageNet-C's anti-aliased disk: a disk of ``radius`` px blurred by ``alias_sigma``.

    Departure from ImageNet-C, stated in the docs: each kernel cell holds the fraction of it inside
    the circle (8 x 8 supersampling) instead of 0 or 1, so the kernel grows continuously with the
    radius; after scaling radii to small images a binary disk kept the same cells for two
    severities.
    """
    half = max(8, math.ceil(radius) + 1)
    supersample = 8
    offsets = (torch.arange(supersample, dtype=torch.float64) + 0.5) / supersample - 0.5
    t = torch.arange(-half, half + 1, dtype=torch.float64)
    fine = (t[:, None] + offsets[None, :]).reshape(-1)
    yy, xx = torch.meshgrid(fine, fine, indexing="ij")
    inside = ((xx**2 + yy**2) <= radius**2).double()
    disk = F.avg_pool2d(inside[None, None], supersample)[0, 0]
    disk /= disk.sum()
    alias_size = 3 if radius <= 8 else 5
    a = torch.arange(alias_size, dtype=torch.float64) - alias_size // 2
    g = torch.exp(-(a**2) / (2 * max(alias_sigma, 1e-3) ** 2))
    g /= g.sum()
    padded = F.pad(disk[None, None], (alias_size // 2,) * 4)
    smooth = F.conv2d(F.conv2d(padded, g.view(1, 1, 1, -1)), g.view(1, 1, -1, 1))[0, 0]
    return (smooth / smooth.sum()).float()


def defocus_blur(x: torch.Tensor, parameter: tuple[float, float], context: Context) -> torch.Tensor:
    """Convolution with an anti-aliased disk (ImageNet-C defocus_blur); radius scales with side."""
    radius, alias_sigma = parameter
    kernel = disk_kernel(radius * context.scale, alias_sigma * context.scale)
    return _depthwise(x, kernel).clamp_(0, 1)


def motion_blur(x: torch.Tensor, parameter: tuple[float, float], context: Context) -> torch.Tensor:
    """ImageNet-C motion blur: a one-sided Gaussian-weighted streak at a random angle in [-45, 45].

    Tap i (0 .. 2 * radius) shifts the image by i px along the angle with edge replication and is
    weighted by exp(-i^2 / (2 sigma^2)); radius and sigma scale with side. The angle is drawn per
    image from its layout stream, so all severities of one image streak the same way.
    """
    radius, sigma = parameter[0] * context.scale, parameter[1] * context.scale
    width = 2 * max(1, round(radius)) + 1
    taps = torch.arange(width, dtype=torch.float64)
    weights = torch.exp(-(taps**2) / (2 * sigma**2))
    weights = (weights / weights.sum()).float()
    angles = torch.cat(_layout(context, lambda g: torch.rand(1, generator=g, dtype=torch.float64) * 90 - 45))
    radians = torch.deg2rad(angles)
    # shift of tap i: dy = -ceil(i sin(a) - 0.5), dx = -ceil(i cos(a) - 0.5) as in ImageNet-C
    dy = -torch.ceil(taps[None, :] * torch.sin(radians)[:, None] - 0.5).long()
    dx = -torch.ceil(taps[None, :] * torch.cos(radians)[:, None] - 0.5).long()
    batch, channels, height, width_px = x.shape
    rows = torch.arange(height)
    cols = torch.arange(width_px)
    out = torch.zeros_like(x)
    for tap in range(width):
        row_index = (rows[None, :] - dy[:, tap, None]).clamp(0, height - 1).to(x.device)
        col_index = (cols[None, :] - dx[:, tap, None]).clamp(0, width_px - 1).to(x.device)
        shifted = x.gather(2, row_index[:, None, :, None].expand(batch, channels, height, width_px))
        shifted = shifted.gather(3, col_index[:, None, None, :].expand(batch, channels, height, width_px))
        out.add_(shifted, alpha=float(weights[tap]))
    return out.clamp_(0, 1)


def zoom_blur(x: torch.Tensor, zooms: tuple[float, ...], context: Context) -> torch.Tensor:
    """Mean of the image and centre crops of it zoomed back to full size (ImageNet-C zoom_blur)."""
    height, width = x.shape[-2:]
    total = x.clone()
    for zoom in zooms:
        crop_h, crop_w = math.ceil(height / zoom), math.ceil(width / zoom)
        top, left = (height - crop_h) // 2, (width - crop_w) // 2
        crop = x[..., top : top + crop_h, left : left + crop_w]
        total += F.interpolate(crop, size=(height, width), mode="bilinear", align_corners=False)
    return (total / (len(zooms) + 1)).clamp_(0, 1)


# ---------------------------------------------------------------------------------- photometric
def brightness(x: torch.Tensor, factor: float, context: Context) -> torch.Tensor:
    """x * factor, clipped (PIL ImageEnhance.Brightness, as MedMNIST-C brightness_up/down)."""
    return _functional().adjust_brightness(x, factor).clamp_(0, 1)


def contrast(x: torch.Tensor, factor: float, context: Context) -> torch.Tensor:
    """Blend with the image's mean grey: mean + factor (x - mean) (PIL ImageEnhance.Contrast)."""
    return _functional().adjust_contrast(x, factor).clamp_(0, 1)


def gamma(x: torch.Tensor, exponent: float, context: Context) -> torch.Tensor:
    """x ** exponent (torchvision adjust_gamma, as MedMNIST-C gamma_corr_up/down)."""
    return _functional().adjust_gamma(x, exponent).clamp_(0, 1)


def colour_temperature(x: torch.Tensor, shift: float, context: Context) -> torch.Tensor:
    """Warm or cool white balance: red gain 1 + s, blue gain 1 - s (sign drawn per image)."""
    signs = torch.cat(_layout(context, lambda g: torch.randint(0, 2, (1,), generator=g) * 2 - 1))
    signs = signs.to(device=x.device, dtype=x.dtype)
    gains = torch.stack([1 + shift * signs, torch.ones_like(signs), 1 - shift * signs], dim=1)
    return (x * gains[:, :, None, None]).clamp_(0, 1)


def uneven_illumination(x: torch.Tensor, strength: float, context: Context) -> torch.Tensor:
    """Multiply by a smooth gain 1 - strength * d, d the distance to a light centre (scaled to <= 1).

    The light centre is drawn per image on a circle of radius 0.35 around the image centre, so one
    side of the fundus is lit and the far side falls off, as with a decentred camera.
    """
    height, width = context.height, context.width
    angles = torch.cat(
        _layout(context, lambda g: torch.rand(1, generator=g, dtype=torch.float64) * 2 * math.pi)
    )
    centre_y = (0.5 + 0.35 * torch.sin(angles)).float().to(x.device)
    centre_x = (0.5 + 0.35 * torch.cos(angles)).float().to(x.device)
    yy = (torch.arange(height, device=x.device, dtype=x.dtype) + 0.5) / height
    xx = (torch.arange(width, device=x.device, dtype=x.dtype) + 0.5) / width
    distance = torch.sqrt(
        (yy[None, :, None] - centre_y[:, None, None]) ** 2
        + (xx[None, None, :] - centre_x[:, None, None]) ** 2
    )
    distance = distance / (0.85 * math.sqrt(2))  # farthest corner from any centre is <= 0.85*sqrt(2)
    gain = (1 - strength * distance.clamp(max=1)).clamp(min=0)
    return (x * gain[:, None]).clamp_(0, 1)


# -------------------------------------------------------------------------------------- digital
def pixelate(x: torch.Tensor, factor: float, context: Context) -> torch.Tensor:
    """BOX-downsample to ``factor`` of the side, nearest-upsample back (ImageNet-C pixelate, PIL BOX/NEAREST)."""
    height, width = x.shape[-2:]
    small = box_resample(box_resample(x, -2, max(1, int(height * factor))), -1, max(1, int(width * factor)))
    return F.interpolate(small, size=(height, width), mode="nearest-exact")


def jpeg(x: torch.Tensor, quality: int, context: Context) -> torch.Tensor:
    """JPEG round trip at ``quality`` (libjpeg through torchvision.io, on the CPU, one image at a time).

    Always on the CPU so the bytes are the same whatever device holds the batch (nvJPEG differs).
    """
    with warnings.catch_warnings():
        # torchvision 0.29 flags its JPEG codec as deprecated in favour of torchcodec; it still works
        warnings.simplefilter("ignore", DeprecationWarning)
        return _jpeg(x, quality, context)


def _jpeg(x: torch.Tensor, quality: int, context: Context) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg  # on first use: crs.corruptions.lazy

    if context.grayscale:
        grey = x.mean(dim=1, keepdim=True)
        as_uint8 = (grey * 255).round_().clamp_(0, 255).to(torch.int32).to(torch.uint8).cpu()
        decoded = torch.stack(
            [decode_jpeg(encode_jpeg(image, quality=quality), mode=ImageReadMode.GRAY) for image in as_uint8]
        )
        # add the grey level's compression error to every channel (exact for grey-replicated films)
        return (x + (decoded.to(device=x.device, dtype=x.dtype) / 255 - grey)).clamp_(0, 1)
    as_uint8 = (x * 255).round_().clamp_(0, 255).to(torch.int32).to(torch.uint8).cpu()
    decoded = torch.stack(
        [decode_jpeg(encode_jpeg(image, quality=quality), mode=ImageReadMode.RGB) for image in as_uint8]
    )
    return decoded.to(device=x.device, dtype=x.dtype) / 255


def jpeg_uint8(source: torch.Tensor, quality: int, context: Context) -> torch.Tensor | None:
    """The JPEG round trip straight on uint8 bytes: the same bytes :func:`jpeg` gives, minus two conversions.

    Applies to colour images and to grey films passed as one channel (for those, :func:`jpeg`'s
    float path rounds ``x + (decoded / 255 - x)`` back to ``decoded``); returns None for
    three-channel images of a grayscale modality, which need the float path's grey mean.
    """
    if context.grayscale and source.shape[1] != 1:
        return None
    from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg  # on first use: crs.corruptions.lazy

    mode = ImageReadMode.GRAY if source.shape[1] == 1 else ImageReadMode.RGB
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        decoded = [decode_jpeg(encode_jpeg(image, quality=quality), mode=mode) for image in source.cpu()]
    return torch.stack(decoded).to(source.device)


# ------------------------------------------------------------------------------------ occlusion
def black_corners(x: torch.Tensor, radius_fraction: float, context: Context) -> torch.Tensor:
    """Zero everything outside a centred disk of radius ``radius_fraction`` x half the side.

    MedMNIST-C black_corner: the circular field of view of a contact dermatoscope.
    """
    height, width = context.height, context.width
    yy = torch.arange(height, device=x.device, dtype=x.dtype) - (height - 1) / 2
    xx = torch.arange(width, device=x.device, dtype=x.dtype) - (width - 1) / 2
    radius = radius_fraction * min(height, width) / 2
    inside = (yy[:, None] ** 2 + xx[None, :] ** 2) <= radius**2
    return x * inside.to(x.dtype)


HAIR_COLOUR = (0.16, 0.11, 0.08)  # dark brown, in [0, 1] RGB


def _hair_paths(generator: torch.Generator, count: int) -> torch.Tensor:
    """``count`` quadratic Bezier curves in unit coordinates, shape (count, 3 control points, 2)."""
    start = torch.rand(count, 2, generator=generator, dtype=torch.float64)
    angle = torch.rand(count, generator=generator, dtype=torch.float64) * 2 * math.pi
    length = 0.25 + 0.45 * torch.rand(count, generator=generator, dtype=torch.float64)
    end = start + length[:, None] * torch.stack([torch.sin(angle), torch.cos(angle)], dim=1)
    bend = (torch.rand(count, 2, generator=generator, dtype=torch.float64) - 0.5) * 0.3
    middle = (start + end) / 2 + bend
    return torch.stack([start, middle, end], dim=1)


MAX_HAIRS = 32


def hair(x: torch.Tensor, parameter: tuple[int, float], context: Context) -> torch.Tensor:
    """Draw ``count`` dark curved hairs of ``width`` px (at 224) over the lesion.

    Hair paths come from the image's layout stream; severity s draws the first ``count`` of the
    same 32 paths, so higher severities add hairs to the lower ones. Each curve is sampled every
    half pixel, stamped into a mask, widened with a max-pool of the hair width and softened by a
    3 x 3 mean so edges are not aliased.
    """
    count, width_224 = parameter
    height, width = context.height, context.width
    thickness = max(1, round(width_224 * context.scale))
    paths = torch.stack(_layout(context, lambda g: _hair_paths(g, MAX_HAIRS)))[:, :count]  # (B, n, 3, 2)
    steps = max(16, 2 * max(height, width))
    t = torch.linspace(0, 1, steps, dtype=torch.float64)[:, None]
    p0, p1, p2 = paths[:, :, None, 0], paths[:, :, None, 1], paths[:, :, None, 2]
    points = (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t**2 * p2  # (B, n, steps, 2)
    rows = (points[..., 0] * height).floor().long()
    cols = (points[..., 1] * width).floor().long()
    batch_index = torch.arange(len(paths))[:, None, None].expand_as(rows)
    keep = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    mask = torch.zeros(len(paths), 1, height, width)
    mask[batch_index[keep], 0, rows[keep], cols[keep]] = 1.0
    mask = F.max_pool2d(mask, kernel_size=thickness, stride=1, padding=thickness // 2)[..., :height, :width]
    mask = F.avg_pool2d(F.pad(mask, (1, 1, 1, 1), mode="replicate"), kernel_size=3, stride=1)
    mask = mask.to(device=x.device, dtype=x.dtype)
    colour = torch.tensor(HAIR_COLOUR, device=x.device, dtype=x.dtype)[None, :, None, None]
    return x * (1 - mask) + colour * mask


# Operators whose output pixel is a function of the input pixel's value alone (no position, no
# image statistics, no randomness): on uint8 input ``api`` applies them as a 256-entry table.
POINTWISE_OPERATORS = frozenset({brightness, gamma})

# Operators with a uint8 -> uint8 form giving the same bytes as the float form (or None when it
# does not apply to the batch): ``api`` uses it for uint8 input.
UINT8_OPERATORS: dict[Callable[..., torch.Tensor], Callable[..., torch.Tensor | None]] = {
    jpeg: jpeg_uint8,
    contrast: contrast_uint8,
    pixelate: pixelate_uint8,
    gaussian_noise: functools.partial(level_noise_uint8, kind="gaussian"),
    shot_noise: functools.partial(level_noise_uint8, kind="shot"),
    impulse_noise: functools.partial(level_noise_uint8, kind="impulse"),
    speckle_noise: functools.partial(level_noise_uint8, kind="speckle"),
}
