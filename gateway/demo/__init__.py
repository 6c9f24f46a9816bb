"""The offline demo that ``agora-gateway serve`` runs: a rule-based model and demo tools."""

from ._model import HELP, DemoModel
from ._tools import demo_tools

__all__ = ["HELP", "DemoModel", "demo_tools"]
