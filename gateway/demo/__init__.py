"""The offline demo that ``agora-gateway serve`` runs: a rule-based model and demo tools.

``DemoModel`` also drives an app's own tools offline, by matching words (see ``_generic``).
"""

from ._model import DemoModel
from ._replies import HELP
from ._tools import demo_tools

__all__ = ["HELP", "DemoModel", "demo_tools"]
