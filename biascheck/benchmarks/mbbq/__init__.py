"""Internal: no public names (the public API is biascheck.__all__ and the packages docs/api.md
lists). Its modules may change without notice.

MBBQ (Neplenbroek et al., COLM 2024): BBQ in English, Dutch, Spanish and Turkish, with control sets."""

__all__: list[str] = []
