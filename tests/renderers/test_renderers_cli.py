import json
import subprocess
import sys
from pathlib import Path

from renderers_support import SAMPLES, pixel_variance, png_image

import renderers

ROOT = Path(renderers.__file__).resolve().parent.parent


def preview(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "renderers", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=ROOT,
        timeout=120,
    )


def test_preview_writes_a_png(tmp_path: Path) -> None:
    props = tmp_path / "props.json"
    props.write_text(json.dumps(SAMPLES["KpiCards"]))
    out = tmp_path / "out.png"
    result = preview("preview", "KpiCards", str(props), "--format", "png", "-o", str(out))
    assert result.returncode == 0, result.stderr
    image = png_image(out.read_bytes())
    assert image.width == 1080 and pixel_variance(image) > 100
    assert str(out) in result.stderr


def test_preview_prints_text_and_html_from_stdin() -> None:
    result = preview("preview", "Checklist", "-", "-f", "text", stdin=json.dumps(SAMPLES["Checklist"]))
    assert result.returncode == 0 and result.stdout == "**Launch** (1/2)\n[x] Domain verified\n[ ] Load test\n"
    page = preview("preview", "Callout", "-", "-f", "html", stdin=json.dumps(SAMPLES["Callout"]))
    assert page.stdout.startswith("<!DOCTYPE html>") and ".ag-c {" in page.stdout and "Payment retry" in page.stdout
    fragment = preview("preview", "Callout", "-", "-f", "html", "--fragment", stdin=json.dumps(SAMPLES["Callout"]))
    assert fragment.stdout.startswith('<div class="ag-c ag-callout')


def test_bad_input_exits_2_with_the_reason() -> None:
    bad = preview("preview", "DataTable", "-", "-f", "text", stdin='{"columns": [], "rows": []}')
    assert bad.returncode == 2 and "columns: List should have at least 1 item" in bad.stderr
    unknown = preview("preview", "Nope", "-", "-f", "text", stdin="{}")
    assert unknown.returncode == 0 and unknown.stdout.startswith("**Nope**")  # text of an unknown component
    unknown_png = preview("preview", "Nope", "-", "-f", "png", stdin="{}")
    assert unknown_png.returncode == 2 and "Unknown component 'Nope'" in unknown_png.stderr
    broken = preview("preview", "Callout", "-", stdin="{not json")
    assert broken.returncode == 2 and "cannot read props" in broken.stderr


def test_list_names_the_components() -> None:
    result = preview("list")
    assert result.returncode == 0
    assert [line.split("@")[0] for line in result.stdout.splitlines()] == list(renderers.default_catalog().names)


def test_preview_draws_an_apps_component_with_its_photo_and_css(tmp_path: Path) -> None:
    from tests.custom_components import ENOUGH_MUG, MUG_PROPS, mug_pixels

    props = tmp_path / "card.json"
    props.write_text(json.dumps(MUG_PROPS))
    catalog = ("--catalog", "examples.product_card.app:catalog")
    out = tmp_path / "card.png"
    result = preview(
        "preview", "ProductCard", str(props), *catalog, "--assets", "examples/product_card/static", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert mug_pixels(out.read_bytes()) > ENOUGH_MUG
    page = preview("preview", "ProductCard", str(props), *catalog, "-f", "html")
    assert page.returncode == 0 and ".ag-product__badge {" in page.stdout and 'src="/assets/product.png"' in page.stdout
    missing = preview("preview", "ProductCard", str(props), *catalog, "--assets", "no/such/folder")
    assert missing.returncode == 2 and "--assets no/such/folder: not a folder" in missing.stderr
