"""``data_tool``: a governed, read-only SQL tool over an SQLAlchemy ``AsyncEngine``.

``_dialects`` (names, catalogs, deny-lists per database), ``_guard`` (parse, check, rewrite),
``_catalog`` (the allow-list and the reflected schema), ``_runners`` (read-only execution under a
time limit), ``_results`` (JSON cells, the byte budget, the ``DataTable``) and ``_data_tool``
(the factory and its hooks).
"""

from ._data_tool import data_tool

__all__ = ["data_tool"]
