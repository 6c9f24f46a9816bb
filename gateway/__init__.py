"""The engine and the server of agora-gateway."""

__all__: list[str] = []
