"""Draw static/product.png, the example's product photo: a mug in flat colours, a few KB.

Run from the repository root: ``python examples/product_card/make_image.py``. The tests look for
``MUG`` in the rendered images, so a card that shows the photo is told from one that lost it.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

BACKGROUND = (244, 239, 230)
MUG = (228, 87, 46)
"""The mug's body: a colour no stylesheet of the gateway uses."""
SAUCER = (46, 134, 171)
SIZE = (640, 480)
_SCALE = 3
"""Drawn this many times larger, then scaled down: smooth edges."""

HERE = Path(__file__).resolve().parent


def draw() -> Image.Image:
    big = Image.new("RGB", (SIZE[0] * _SCALE, SIZE[1] * _SCALE), BACKGROUND)
    pen = ImageDraw.Draw(big)
    unit = 2 * _SCALE  # the shapes are laid out on a 320 x 240 grid

    def box(*xy: int) -> tuple[int, ...]:
        return tuple(v * unit for v in xy)

    pen.ellipse(box(60, 180, 260, 220), fill=SAUCER)  # the saucer
    pen.ellipse(box(190, 80, 250, 160), outline=MUG, width=14 * unit)  # the handle
    pen.rounded_rectangle(box(90, 50, 210, 195), radius=18 * unit, fill=MUG)  # the body
    pen.rectangle(box(90, 50, 210, 62), fill=(250, 250, 250))  # the rim
    return big.resize(SIZE, Image.Resampling.LANCZOS)


if __name__ == "__main__":
    target = HERE / "static" / "product.png"
    # A palette of 32 colours: flat shapes and their smoothed edges fit, and the file stays a few KB.
    draw().quantize(colors=32).save(target, format="PNG", optimize=True)
    print(f"{target} ({target.stat().st_size} bytes)")
