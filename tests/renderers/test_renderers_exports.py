import subprocess
import sys
from pathlib import Path

import renderers

ROOT = Path(renderers.__file__).resolve().parent.parent


def test_all_is_sorted_and_matches_the_public_names() -> None:
    public = {name for name in vars(renderers) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(renderers, name)).__name__ == "module"}
    assert renderers.__all__ == sorted(renderers.__all__, key=lambda n: (not n.isupper(), n))
    assert set(renderers.__all__) == public - modules
    for name in renderers.__all__:
        assert getattr(renderers, name) is not None


def test_contract_names_are_exported() -> None:
    for name in (
        "Catalog",
        "ComponentDef",
        "default_catalog",
        "Renderer",
        "Rendered",
        "negotiate",
        "MediaStore",
        "UnknownComponentError",
        "PropsInvalidError",
        "RenderTimeoutError",
        "MediaTokenError",
        "Delivery",
        "component_stylesheet",
    ):
        assert name in renderers.__all__


def test_import_and_building_a_renderer_load_no_engine() -> None:
    code = (
        "import sys, renderers\n"
        "r = renderers.Renderer()\n"
        "heavy = [m for m in ('weasyprint', 'pypdfium2', 'PIL') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == ""
