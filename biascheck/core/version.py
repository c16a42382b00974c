"""biascheck's version, in the bottom layer: every file it writes names the tool that wrote it."""

VERSION = "0.1.0"  # pyproject.toml's [project] version; a test holds them equal
