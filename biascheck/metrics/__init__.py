"""Internal: no public names (the public API is biascheck.__all__ and the packages docs/api.md
lists). Its modules may change without notice."""

__all__: list[str] = []
