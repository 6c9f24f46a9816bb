"""The docs a user reads hold: no internal references, links that resolve, every setting listed.

- No file of the repository cites the internal design document (a file users do not have);
  docs/architecture.md is the users' version.
- Every relative link of README.md and docs/ points at a file that exists, and at a heading of
  it when it names one (``#anchor``, as GitHub makes them).
- Every environment variable a settings model reads (``gateway.Settings`` and each channel's
  options, found by walking the packages) appears in README's "Configure" section, and every
  field of the options that are set in code appears where the docs list them.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from tests.test_settings_variables import settings_models

ROOT = Path(__file__).resolve().parents[1]

# Generated or installed, never written by us (the .gitignore's directories).
SKIPPED_DIRS = {".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "dist", "build"}

# Spelled in pieces so that this file does not match itself.
INTERNAL_DOC = re.compile(
    r"\bDES" + r"IGN|(?i:des" + r"ign\.md|\bsection \d+(?:\.\d+)? of the des" + r"ign\b|des" + r"ign §)"
)


def repository_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*")):
        parts = set(path.relative_to(ROOT).parts[:-1])
        if parts & SKIPPED_DIRS or any(part.endswith(".egg-info") for part in parts) or not path.is_file():
            continue
        files.append(path)
    return files


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None  # an image, a PDF
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_file_cites_the_internal_design_document() -> None:
    cited = []
    for path in repository_files():
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if INTERNAL_DOC.search(line):
                cited.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert cited == [], "point these at docs/architecture.md (or another doc) instead:\n" + "\n".join(cited)


def test_the_internal_reference_pattern_catches_what_it_is_for() -> None:
    # The pattern itself, on the forms the references took (it must not pass everything).
    word = "des" + "ign"
    for cited in (f"({word.upper()} section 5)", f"see {word.upper()}.md", f"{word}.md", f"section 6 of the {word}"):
        assert INTERNAL_DOC.search(cited), cited
    for fine in ("as designed", "the design of the relay", "docs/architecture.md"):
        assert not INTERNAL_DOC.search(fine), fine


# -- links ----------------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(markdown: str) -> str:
    """The Markdown without its code (fenced blocks and code spans hold no links)."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def anchors(markdown: str) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces as ``-``, ``-1`` for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_anchors_are_made_as_github_makes_them() -> None:
    doc = "# A: b, `C`\n## 1. Try it, step by step\n```\n# not a heading\n```\n## Twice\n## Twice\n"
    assert anchors(doc) == {"a-b-c", "1-try-it-step-by-step", "twice", "twice-1"}


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not Markdown")
        elif anchor and anchor not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert broken == []


# -- settings ---------------------------------------------------------------------------------------


def variables(model: type[BaseSettings]) -> dict[str, list[str]]:
    """Each field's environment variables: its aliases, else the model's prefix and its name."""
    prefix = str(model.model_config.get("env_prefix") or "")
    out = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names = [choice for choice in alias.choices if isinstance(choice, str)]
        elif isinstance(alias, str):
            names = [alias]
        else:
            names = [prefix + name]
        out[name] = [variable.upper() for variable in names]
    return out


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_settings_models_are_all_found() -> None:
    names = {model.__name__ for model in settings_models()}
    assert {
        "Settings", "WebOptions", "TwilioOptions", "WhatsAppSenderOptions", "WhatsAppCloudOptions", "TelegramOptions",
    } <= names  # fmt: skip


def test_every_setting_variable_is_in_the_readme() -> None:
    configure = readme_section("Configure")
    missing = [
        f"{model.__name__}.{field}: {variable}"
        for model in settings_models()
        for field, names in variables(model).items()
        for variable in names
        if f"`{variable}`" not in configure
    ]
    assert missing == [], "add these to README's settings tables"


CODE_OPTIONS = {
    "README.md": [
        ("gateway", "ApprovalPolicy"),
        ("channels.ag_ui", "AgUiOptions"),
        ("channels.a2a", "A2AOptions"),
        ("channels.whatsapp", "WhatsAppOptions"),
    ],
    "docs/channels.md": [
        ("gateway", "PushOptions"),
        ("gateway", "InboundOptions"),
        ("gateway", "RetryPolicy"),
        ("channels.whatsapp", "DeliveryOptions"),
    ],
}


@pytest.mark.parametrize("doc", CODE_OPTIONS)
def test_every_field_of_the_options_set_in_code_is_listed(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = []
    for module, name in CODE_OPTIONS[doc]:
        options = getattr(importlib.import_module(module), name)
        bases = [base for base in options.__mro__[1:] if dataclasses.is_dataclass(base)]
        inherited = {field.name for base in bases for field in dataclasses.fields(base)}
        for field in dataclasses.fields(options):
            if not field.name.startswith("_") and field.name not in inherited and f"`{name}.{field.name}`" not in text:
                missing.append(f"{name}.{field.name}")
    assert missing == [], f"add these to {doc}"
