"""The built-in components and ``default_catalog()``."""

from __future__ import annotations

import functools

from renderers._catalog import Catalog, ComponentDef
from renderers._html import TEMPLATES_DIR

from ._cards import CalloutProps, KpiCardsProps, callout_text, kpi_context, kpi_text
from ._chart import ChartProps, chart_context, chart_text
from ._code import CodeBlockProps, code_context, code_media, code_text
from ._document import DocumentProps, document_context, document_text
from ._lists import ChecklistProps, TimelineProps, checklist_context, checklist_text, timeline_context, timeline_text
from ._table import DataTableProps, datatable_context, datatable_media, datatable_text

__all__ = [
    "CalloutProps",
    "ChartProps",
    "ChecklistProps",
    "CodeBlockProps",
    "DataTableProps",
    "DocumentProps",
    "KpiCardsProps",
    "TimelineProps",
    "default_catalog",
]


@functools.cache
def _template(name: str) -> str:
    return (TEMPLATES_DIR / f"{name}.html.j2").read_text(encoding="utf-8")


def default_catalog() -> Catalog:
    """A catalog of the built-in components, at version 1.

    ``DataTable``, ``Chart``, ``KpiCards``, ``Callout``, ``Checklist``, ``Timeline``,
    ``CodeBlock`` and ``Document``. Add your own with ``default_catalog().extend([...])``.

    The built-in templates skip the sanitizer (``sanitize=False``): they are autoescaped, and no
    prop reaches a URL, a ``style`` or an event attribute (the only inline style is a percentage
    computed in Python); the hostile-props tests check their output without it.
    """
    return Catalog(
        [
            ComponentDef(
                "DataTable",
                1,
                DataTableProps,
                _template("datatable"),
                datatable_text,
                datatable_media,
                context=datatable_context,
                sanitize=False,
                description="A table: 1-12 columns with alignment and formats, up to 500 rows.",
            ),
            ComponentDef(
                "Chart",
                1,
                ChartProps,
                _template("chart"),
                chart_text,
                "image",
                context=chart_context,
                sanitize=False,
                description="A bar or line chart of one or more series, drawn as SVG.",
            ),
            ComponentDef(
                "KpiCards",
                1,
                KpiCardsProps,
                _template("kpicards"),
                kpi_text,
                "image",
                context=kpi_context,
                sanitize=False,
                description="Headline numbers with their unit and change.",
            ),
            ComponentDef(
                "Callout",
                1,
                CalloutProps,
                _template("callout"),
                callout_text,
                "image",
                sanitize=False,
                description="A message in a tone: info, success, warning or danger.",
            ),
            ComponentDef(
                "Checklist",
                1,
                ChecklistProps,
                _template("checklist"),
                checklist_text,
                "image",
                context=checklist_context,
                sanitize=False,
                description="Items done or still to do, with progress.",
            ),
            ComponentDef(
                "Timeline",
                1,
                TimelineProps,
                _template("timeline"),
                timeline_text,
                "image",
                context=timeline_context,
                sanitize=False,
                description="Dated events in order.",
            ),
            ComponentDef(
                "CodeBlock",
                1,
                CodeBlockProps,
                _template("codeblock"),
                code_text,
                code_media,
                context=code_context,
                sanitize=False,
                description="Source code, escaped, in monospace.",
            ),
            ComponentDef(
                "Document",
                1,
                DocumentProps,
                _template("document"),
                document_text,
                "pdf",
                context=document_context,
                sanitize=False,
                description="A document of several pages: title, sections, tables and totals.",
            ),
        ]
    )
